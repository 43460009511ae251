"""A larger bank stays navigable: topics by interview round and group on the topics page,
filters by difficulty and format on topic pages and in the quiz builder."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.questions.models import Question
from app.quizzes.models import QuizItem
from tests.factories import copy_bank, form_fields, parse, start_quiz, text


def test_topics_are_listed_by_round_then_under_their_group_headings(client: TestClient) -> None:
    page = parse(client.get("/topics"))
    rounds = page.select("form.quiz-form fieldset.round")
    assert [r["data-round"] for r in rounds] == ["ddp", "incident"]
    assert [text(r.select_one(".round-title")) for r in rounds] == ["The DDP round",
                                                                    "The incident round"]
    # Within a round, groups in order; a topic without a group goes under "More topics", last.
    legends = [[text(lg) for lg in r.select("fieldset.topic-group > legend")] for r in rounds]
    assert legends == [["Fixture basics"], ["More topics"]]
    assert [[a["href"] for a in r.select("ul.topic-picks a")] for r in rounds] == [
        ["/topics/basics"], ["/topics/traces"]]


def test_a_rounds_button_quizzes_on_every_topic_of_that_round(
    client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    action, hidden = form_fields(parse(client.get("/")), "form.round-list")
    r = client.post(action, data={**hidden, "round": "incident"}, follow_redirects=False)
    assert r.status_code == 303
    with session_factory() as s:
        topics = s.scalars(select(Question.topic).join(QuizItem, QuizItem.question_id == Question.id))
        assert set(topics) == {"traces"}
    bad = client.post(action, data={**hidden, "round": "nope"}, follow_redirects=False)
    assert bad.status_code == 422 and "Unknown round" in bad.text


def test_topic_page_filters_by_difficulty_and_format(client: TestClient) -> None:
    listed = lambda url: [a["href"] for a in parse(client.get(url)).select(".question-list a")]  # noqa: E731
    assert len(listed("/topics/basics")) == 3
    assert listed("/topics/basics?difficulty=2") == ["/questions/fixture-multi"]
    assert listed("/topics/basics?types=numeric&types=single") == [
        "/questions/fixture-single", "/questions/fixture-numeric"]
    page = parse(client.get("/topics/basics?difficulty=1&types=multi"))
    assert not page.select(".question-list a")
    assert "No question of this topic matches" in text(page)
    assert page.select_one('input[name=types][value=multi]').has_attr("checked")
    # Unknown filter values are no filter, not an error page.
    assert len(listed("/topics/basics?difficulty=any&types=essay")) == 3


def test_a_quiz_of_one_format_holds_only_that_format(
    client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    start_quiz(client, count="10", types=["trace"])
    with session_factory() as s:
        types = s.scalars(select(Question.type).join(QuizItem, QuizItem.question_id == Question.id))
        assert sorted(types) == ["trace", "trace"]


def test_an_unknown_format_is_refused_by_name(client: TestClient) -> None:
    action, hidden = form_fields(parse(client.get("/topics")), "form.quiz-form")
    response = client.post(action, data={**hidden, "types": "essay"}, follow_redirects=False)
    assert response.status_code == 422 and "essay" in response.text


def test_a_topics_round_is_read_stored_exported_and_refused_by_name_when_unknown(
    client: TestClient, session_factory: sessionmaker[Session], tmp_path: Path,
) -> None:
    from app.questions.bank import load_bank, write_bank
    from app.questions.models import Topic
    from app.questions.service import export_bank

    with session_factory() as s:
        assert {t.slug: t.round for t in s.scalars(select(Topic))} == {"basics": "ddp",
                                                                      "traces": "incident"}
        docs, topics = export_bank(db_session=s)
    write_bank(tmp_path / "out", docs, topics)
    assert "round: incident" in (tmp_path / "out" / "traces" / "_topic.yaml").read_text()
    assert load_bank(tmp_path / "out").topics["traces"].round == "incident"
    bank = copy_bank(tmp_path / "bad")
    path = bank / "traces" / "_topic.yaml"
    path.write_text(path.read_text().replace("round: incident", "round: lightning"))
    errors = load_bank(bank).errors
    assert [(e.file, e.field) for e in errors] == [("traces/_topic.yaml", "round")]
