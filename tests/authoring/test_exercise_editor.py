"""Exercises in the editor: written there like any question, round-tripped without loss, and
published only through the gate (reference passes every check, starter fails one), with real
gloo runs."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.questions.models import Question, QuestionRevision
from app.settings import Settings
from tests.authoring.helpers import create_question, save_editor
from tests.authoring.test_publish import _post, _publish, work
from tests.exercises.helpers import SLUG, SOLUTION, STARTER
from tests.factories import EXERCISE_BANK, import_folder, parse, parse_fragment

HARNESS = (EXERCISE_BANK / "drills" / "checks.py").read_text()
CHECKS = """\
- label: every rank gets the total
  value: {name: total, equals: 3}
- label: rank 1 agrees
  value: {name: total, rank: 1, equals: 3}
  hidden: true
"""


def _exercise_fields(starter: str = STARTER, solution: str = SOLUTION) -> dict[str, Any]:
    return {"type": "exercise", "choice_text": ["", ""], "choice_correct": None,
            "snippet": starter, "solution": solution, "harness": HARNESS, "expect": CHECKS,
            "knobs": "", "hint_1": "Every rank must take part.", "hint_2": "", "hint_3": "",
            "explanation": "All-reduce it."}


def _revisions(factory: sessionmaker[Session], slug: str) -> list[QuestionRevision]:
    with factory() as s:
        q = s.scalar(select(Question).where(Question.slug == slug))
        assert q is not None
        return list(s.scalars(select(QuestionRevision).where(QuestionRevision.question_id == q.id)))


def test_an_imported_exercise_round_trips_through_the_editor_unchanged(
    admin_client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    import_folder(session_factory, EXERCISE_BANK)
    page = parse(admin_client.get(f"/author/questions/{SLUG}"))
    assert page.select_one("textarea[name=solution]").get_text() == SOLUTION
    assert page.select_one("select[name=type] option[selected]")["value"] == "exercise"
    response = save_editor(admin_client, SLUG)
    assert response.status_code == 303, response.text
    assert response.headers["location"].endswith("saved=same")
    assert len(_revisions(session_factory, SLUG)) == 1


def test_an_exercise_written_in_the_editor_publishes_once_its_gate_passes(
    author_client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    created = create_question(author_client, "sum-drill", **_exercise_fields())
    assert created.status_code == 303, created.text
    [rev] = _revisions(session_factory, "sum-drill")
    assert rev.content["exercise"]["solution_code"] == SOLUTION
    assert rev.content["exercise"]["hints"] == ["Every rank must take part."]
    assert rev.content["verify"]["expect"][1]["hidden"] is True

    _post(author_client, "/author/questions/sum-drill/verify", "/author/questions/sum-drill")
    assert work(session_factory, settings) == 2  # the reference and the starter
    panel = parse_fragment(author_client.get("/author/questions/sum-drill/gate"))
    states = [tr["data-state"] for tr in panel.select("tr[data-state]")]
    assert states == ["passed", "the starter fails a check, as it must"]
    assert _publish(author_client, "sum-drill").status_code == 303
    assert author_client.get("/exercises/sum-drill").status_code == 200


def test_the_editor_refuses_to_publish_an_exercise_whose_starter_already_passes(
    author_client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    fields = _exercise_fields(starter=SOLUTION + "\n# already fixed\n")
    assert create_question(author_client, "no-bug", **fields).status_code == 303
    _post(author_client, "/author/questions/no-bug/verify", "/author/questions/no-bug")
    work(session_factory, settings)
    refused = _publish(author_client, "no-bug")
    assert refused.status_code == 409
    assert "nothing for the learner to fix" in refused.text


def test_an_exercise_without_a_solution_is_refused_naming_the_field(
    author_client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    response = create_question(author_client, "no-solution", **_exercise_fields(solution=""))
    assert response.status_code == 422
    assert "reference solution" in response.text


def test_the_learner_preview_of_an_exercise_shows_its_starter_checks_and_hints(
    author_client: TestClient,
) -> None:
    from tests.authoring.helpers import htmx, question_fields

    page = parse(author_client.get("/author/questions/new"))
    data = question_fields("preview-drill", **_exercise_fields())
    r = author_client.post("/author/preview/question", data=data, headers=htmx(page))
    assert r.status_code == 200
    preview = parse_fragment(r)
    assert "rank_total" in preview.get_text()
    labels = [li.get_text(" ", strip=True) for li in preview.select("ul li")]
    assert "rank 1 agrees (hidden from learners)" in labels
    assert preview.select_one("details summary").get_text() == "Hint 1"


def test_a_bank_exercise_with_forbidden_collectives_and_wrong_solutions_round_trips(
    admin_client: TestClient, session_factory: sessionmaker[Session], tmp_path: Any,
) -> None:
    """The editor shows the forbidden collectives and every known-wrong solution with its
    code, and saving unchanged keeps the revision (the editor used to drop both)."""
    import shutil

    from tests.factories import REAL_BANK

    shutil.copytree(REAL_BANK / "exercises", tmp_path / "bank" / "exercises")
    import_folder(session_factory, tmp_path / "bank")
    slug = "ring-allreduce-send-recv"
    page = parse(admin_client.get(f"/author/questions/{slug}"))
    assert "all_reduce" in page.select_one("input[name=forbid]")["value"]
    wrong = page.select_one("textarea[name=wrong]").get_text()
    assert "ring_wrong_builtin.py" in wrong and "dist.all_reduce(tensor)" in wrong
    response = save_editor(admin_client, slug)
    assert response.status_code == 303, response.text
    assert response.headers["location"].endswith("saved=same")


def test_a_wrong_solution_written_in_the_editor_is_run_by_the_gate(
    author_client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    wrong = ("- file: sum_drill_wrong_rank.py\n  why: returns this rank's number only\n"
             "  code: |\n    def rank_total():\n        return rank + 1\n")
    fields = {**_exercise_fields(), "wrong": wrong, "forbid": "broadcast"}
    created = create_question(author_client, "sum-drill-wrong", **fields)
    assert created.status_code == 303, created.text
    [rev] = _revisions(session_factory, "sum-drill-wrong")
    assert rev.content["exercise"]["forbid"] == ["broadcast"]
    assert rev.content["exercise"]["wrong"][0]["code"].startswith("def rank_total():")
    _post(author_client, "/author/questions/sum-drill-wrong/verify",
          "/author/questions/sum-drill-wrong")
    assert work(session_factory, settings) == 3  # the reference, the starter, the wrong one
    panel = parse_fragment(author_client.get("/author/questions/sum-drill-wrong/gate"))
    roles = [td.get_text(" ", strip=True) for td in panel.select("td.combo-role")]
    assert "wrong sum_drill_wrong_rank.py returns this rank's number only" in roles
    assert _publish(author_client, "sum-drill-wrong").status_code == 303
    broken = "- file: x.py\n  why: y\n  code: 'def ('\n"
    bad = create_question(author_client, "sum-drill-bad", **{**fields, "wrong": broken})
    assert bad.status_code == 422 and "wrong solution 1: Python syntax error" in bad.text
