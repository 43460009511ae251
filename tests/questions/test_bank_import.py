"""Importing the bank: upsert by slug, a revision per change, retire and restore."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.questions.bank import load_bank
from app.questions.models import STATUS_PUBLISHED, STATUS_RETIRED, Question, QuestionRevision
from app.questions.service import import_bank
from app.quizzes.models import Attempt
from tests.factories import (
    BROKEN_BANKS,
    FIXTURE,
    FIXTURE_BANK,
    copy_bank,
    count,
    import_folder,
    parse,
    start_quiz,
    submit_answer,
)


def _question(session_factory: sessionmaker[Session], slug: str) -> Question:
    with session_factory() as session:
        question = session.scalar(select(Question).where(Question.slug == slug))
        assert question is not None
        return question


def _revisions(session_factory: sessionmaker[Session], slug: str) -> list[int]:
    with session_factory() as session:
        return list(session.scalars(
            select(QuestionRevision.number).join(Question, Question.id == QuestionRevision.question_id)
            .where(Question.slug == slug).order_by(QuestionRevision.number)
        ))


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_import_creates_topics_questions_and_first_revisions(session_factory: sessionmaker[Session]) -> None:
    report = import_folder(session_factory, FIXTURE_BANK)
    assert sorted(report.created) == sorted(FIXTURE)
    question = _question(session_factory, "fixture-single")
    assert (question.status, question.topic, question.difficulty, question.type) == (
        STATUS_PUBLISHED, "basics", 1, "single")
    assert question.tags == ["ddp"]
    assert question.has_snippet
    assert _revisions(session_factory, "fixture-single") == [1]


def test_importing_the_same_bank_again_changes_nothing(session_factory: sessionmaker[Session]) -> None:
    import_folder(session_factory, FIXTURE_BANK)
    report = import_folder(session_factory, FIXTURE_BANK)
    assert (report.created, report.updated, report.retired) == ([], [], [])
    assert sorted(report.unchanged) == sorted(FIXTURE)
    assert count(session_factory, QuestionRevision) == len(FIXTURE)


def test_a_bank_with_errors_is_refused_by_the_service(db_session: Session) -> None:
    bank = load_bank(BROKEN_BANKS / "two-correct")
    with pytest.raises(ValueError, match="errors"):
        import_bank(db_session=db_session, bank=bank)


def test_snippet_change_alone_makes_a_new_revision(
    session_factory: sessionmaker[Session], tmp_path: Path
) -> None:
    bank_dir = copy_bank(tmp_path / "bank")
    import_folder(session_factory, bank_dir)
    (bank_dir / "basics" / "fixture_single.py").write_text('report("g", 3.0)\n')
    report = import_folder(session_factory, bank_dir)
    assert report.updated == ["fixture-single"]
    assert _revisions(session_factory, "fixture-single") == [1, 2]


def test_changed_question_gets_a_new_revision_and_old_attempts_keep_theirs(
    client: TestClient, session_factory: sessionmaker[Session], tmp_path: Path
) -> None:
    bank_dir = copy_bank(tmp_path / "bank")
    first_rev = _question(session_factory, "fixture-single").current_revision_id
    assert submit_answer(client, "/questions/fixture-single", "b", htmx=True).status_code == 200

    # The new revision moves the right answer from b to a.
    path = bank_dir / "basics" / "fixture-single.yaml"
    wrong_a = "  - text: The SENTINEL-WRONG-A sum\n"
    _edit(path, wrong_a, wrong_a + "    correct: true\n")
    _edit(path, "    correct: true\n  - text: The SENTINEL-WRONG-C", "  - text: The SENTINEL-WRONG-C")
    # The expectation's binding moves with the key, or the loader rejects the file.
    _edit(path, "supports: [b]", "supports: [a]")
    _edit(path, "rules_out: [a, c]", "rules_out: [b, c]")
    report = import_folder(session_factory, bank_dir)

    assert report.updated == ["fixture-single"]
    question = _question(session_factory, "fixture-single")
    assert question.current_revision_id != first_rev
    assert _revisions(session_factory, "fixture-single") == [1, 2]
    with session_factory() as session:
        attempt = session.scalars(select(Attempt)).one()
        assert (attempt.revision_id, attempt.answer, attempt.correct) == (first_rev, "b", True)
    graded = submit_answer(client, "/questions/fixture-single", "a", htmx=True)
    assert parse(graded).select_one("#verdict").get_text(strip=True) == "Right"


def test_a_quiz_in_progress_keeps_grading_by_the_revision_it_started_with(
    client: TestClient, session_factory: sessionmaker[Session], tmp_path: Path
) -> None:
    first = start_quiz(client, topics="traces", difficulty="3")  # only fixture-trace-buckets
    bank_dir = copy_bank(tmp_path / "bank")
    _edit(bank_dir / "traces" / "fixture-trace-buckets.yaml", "value: 4\n", "value: 7\n")
    assert import_folder(session_factory, bank_dir).updated == ["fixture-trace-buckets"]

    graded = submit_answer(client, first, "4", htmx=True)
    assert parse(graded).select_one("#verdict").get_text(strip=True) == "Right"
    with session_factory() as session:
        attempt = session.scalars(select(Attempt)).one()
        revision = session.get(QuestionRevision, attempt.revision_id)
        assert revision is not None and revision.number == 1


def test_a_removed_file_retires_the_question_hiding_it_but_keeping_attempts(
    client: TestClient, session_factory: sessionmaker[Session], tmp_path: Path
) -> None:
    submit_answer(client, "/questions/fixture-multi", ["a", "b"], htmx=True)
    bank_dir = copy_bank(tmp_path / "bank")
    (bank_dir / "basics" / "fixture-multi.yaml").unlink()

    report = import_folder(session_factory, bank_dir)

    assert report.retired == ["fixture-multi"]
    assert _question(session_factory, "fixture-multi").status == STATUS_RETIRED
    assert count(session_factory, Attempt) == 1
    assert client.get("/questions/fixture-multi").status_code == 404
    assert client.get("/api/v1/questions/fixture-multi").status_code == 404
    assert "fixture-multi" not in [q["slug"] for q in client.get("/api/v1/questions").json()]
    topic_links = [a["href"] for a in parse(client.get("/topics/basics")).select("ul.question-list a")]
    assert "/questions/fixture-multi" not in topic_links
    counts = {row.select_one("a").get_text(strip=True): row.select_one(".hint").get_text(strip=True)
              for row in parse(client.get("/topics")).select("ul.topic-picks li")}
    assert counts["Basics"] == "2"
    quiz = start_quiz(client, count="30")
    slugs = [a["href"] for a in parse(client.get(quiz.rsplit("/", 1)[0] + "/summary")).select(
        "ol.summary-questions a[href^='/questions/']")]
    assert len(slugs) == 4 and "/questions/fixture-multi" not in slugs


def test_re_adding_a_retired_file_restores_the_same_question(
    session_factory: sessionmaker[Session], tmp_path: Path
) -> None:
    bank_dir = copy_bank(tmp_path / "bank")
    import_folder(session_factory, bank_dir)
    before = _question(session_factory, "fixture-numeric")
    moved = tmp_path / "fixture-numeric.yaml"
    (bank_dir / "basics" / "fixture-numeric.yaml").rename(moved)
    assert import_folder(session_factory, bank_dir).retired == ["fixture-numeric"]

    moved.rename(bank_dir / "basics" / "fixture-numeric.yaml")
    report = import_folder(session_factory, bank_dir)

    assert report.restored == ["fixture-numeric"]
    assert report.unchanged.count("fixture-numeric") == 1
    after = _question(session_factory, "fixture-numeric")
    assert (after.id, after.status, after.current_revision_id) == (
        before.id, STATUS_PUBLISHED, before.current_revision_id)


def test_a_question_moved_to_another_topic_keeps_its_identity(
    session_factory: sessionmaker[Session], tmp_path: Path
) -> None:
    bank_dir = copy_bank(tmp_path / "bank")
    import_folder(session_factory, bank_dir)
    before = _question(session_factory, "fixture-numeric")
    moved = bank_dir / "traces" / "fixture-numeric.yaml"
    (bank_dir / "basics" / "fixture-numeric.yaml").rename(moved)
    _edit(moved, "topic: basics", "topic: traces")

    report = import_folder(session_factory, bank_dir)

    assert (report.updated, report.retired) == (["fixture-numeric"], [])
    after = _question(session_factory, "fixture-numeric")
    assert (after.id, after.topic) == (before.id, "traces")
    assert _revisions(session_factory, "fixture-numeric") == [1, 2]
