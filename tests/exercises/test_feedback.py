"""Feedback that teaches, through the API as a learner: expected against measured for each
combination, the learner's own frames of a traceback only, and the reference solution with a
diff once the learner solved it, gave up, or failed three Runs — never before."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.exercises.service import RUNS_BEFORE_SOLUTION
from app.quizzes.models import Attempt
from app.review.models import ReviewCard
from app.settings import Settings
from app.verify.service import own_frames
from app.verify.worker import Worker
from tests.exercises.helpers import SLUG, SOLUTION, STARTER
from tests.factories import count, form_fields, parse


def _run(client: TestClient, factory: sessionmaker[Session], settings: Settings, code: str) -> dict:
    started = client.post(f"/api/v1/exercises/{SLUG}/run", json={"code": code})
    assert started.status_code == 200, started.text
    worker = Worker(factory, settings)
    while worker.run_once():
        pass
    body = client.get(started.json()["url"]).json()
    assert body["status"] == "done", body
    return body


def test_the_solution_opens_after_three_failed_runs_with_a_diff_from_the_learners_code(
    ex_client: TestClient, session_factory: sessionmaker[Session], settings: Settings,
) -> None:
    assert ex_client.get(f"/api/v1/exercises/{SLUG}/solution").status_code == 403
    for n in range(1, RUNS_BEFORE_SOLUTION + 1):
        body = _run(ex_client, session_factory, settings, f"{STARTER}\n# try {n}\n")
        assert body["passed"] is False
        failing = [c for c in body["visible"] if not c["passed"]]
        assert failing and all(r["expected"] and r["measured"] for r in failing[0]["runs"])
        progress = body["progress"]
        assert progress["failed_runs"] == n
        assert progress["solution_open"] is (n >= RUNS_BEFORE_SOLUTION)
        if n < RUNS_BEFORE_SOLUTION:
            refused = ex_client.get(f"/api/v1/exercises/{SLUG}/solution")
            assert refused.status_code == 403 and "to go" in refused.json()["detail"]
    opened = ex_client.get(f"/api/v1/exercises/{SLUG}/solution").json()
    assert opened["solution"] == SOLUTION
    assert opened["your_code"].endswith(f"# try {RUNS_BEFORE_SOLUTION}\n")
    assert opened["diff"].startswith("--- your code\n+++ the reference solution\n")
    # Another learner has tried nothing: still closed to them.
    other = TestClient(ex_client.app)
    assert other.get(f"/api/v1/exercises/{SLUG}/solution").status_code == 403


def test_giving_up_is_a_failed_attempt_that_comes_back_in_review_and_opens_the_solution(
    ex_client: TestClient, session_factory: sessionmaker[Session],
) -> None:
    given = ex_client.post(f"/api/v1/exercises/{SLUG}/give-up", json={"code": STARTER})
    assert given.status_code == 200, given.text
    assert given.json()["solution"] == SOLUTION and given.json()["your_code"] == STARTER
    with session_factory() as s:
        (attempt,) = s.scalars(select(Attempt)).all()
        assert attempt.correct is False and attempt.answer["gave_up"] is True
    assert count(session_factory, ReviewCard) == 1
    assert ex_client.get(f"/api/v1/exercises/{SLUG}/solution").status_code == 200


def test_a_crash_shows_the_learners_own_frames_never_the_checks(
    ex_client: TestClient, session_factory: sessionmaker[Session], settings: Settings,
) -> None:
    crashing = "def rank_total():\n    return 1 / 0\n"
    body = _run(ex_client, session_factory, settings, crashing)
    error = body["error"]
    assert error is not None and error["type"] == "ZeroDivisionError"
    assert 'File "snippet.py", line 2' in error["traceback"]
    assert "checks.py" not in error["traceback"]
    assert error["line"] == 2


def test_own_frames_keeps_the_learners_frames_and_the_exception() -> None:
    traceback = (
        'Traceback (most recent call last):\n'
        '  File "checks.py", line 9, in <module>\n'
        '    _total = rank_total()\n'
        '  File "snippet.py", line 2, in rank_total\n'
        '    return 1 / 0\n'
        'ZeroDivisionError: division by zero')
    assert own_frames(traceback) == (
        'Traceback (most recent call last):\n'
        '  File "snippet.py", line 2, in rank_total\n'
        '    return 1 / 0\n'
        'ZeroDivisionError: division by zero')


def test_the_pages_offer_give_up_then_the_solution_page_with_its_diff(
    ex_client: TestClient, session_factory: sessionmaker[Session], settings: Settings,
) -> None:
    """Through the pages, as a browser without JavaScript uses them: the result says how many
    failed Runs until the solution opens and offers "I give up"; the solution page is 403
    before that; giving up opens it, with the diff from the learner's code."""
    page = parse(ex_client.get(f"/exercises/{SLUG}"))
    assert page.select_one(".solution-door") is None  # nothing tried yet: no door
    assert ex_client.get(f"/exercises/{SLUG}/solution").status_code == 403
    token = form_fields(page, "form.exercise-form")[1]["csrf_token"]
    ran = ex_client.post(f"/exercises/{SLUG}/run", data={"csrf_token": token, "code": STARTER},
                         follow_redirects=False)
    assert ran.status_code == 303
    worker = Worker(session_factory, settings)
    while worker.run_once():
        pass
    result = parse(ex_client.get(ran.headers["location"]))
    door = result.select_one(".solution-door")
    assert door is not None and door.select_one(".see-solution") is None
    assert door.select_one(".runs-to-solution")["data-runs"] == str(RUNS_BEFORE_SOLUTION - 1)
    refused = ex_client.get(f"/exercises/{SLUG}/solution")
    assert refused.status_code == 403 and "to go" in refused.text
    # The exercise page itself keeps the door open once something was tried.
    again = parse(ex_client.get(f"/exercises/{SLUG}"))
    action, give_up = form_fields(again, "form.give-up-form")
    gave = ex_client.post(action, data=give_up, follow_redirects=False)
    assert gave.status_code == 303 and gave.headers["location"] == f"/exercises/{SLUG}/solution"
    shown = parse(ex_client.get(f"/exercises/{SLUG}/solution"))
    assert "You gave up" in shown.select_one(".exercise-solution").get_text()
    added = [s.get_text() for s in shown.select("pre.diff .add")]
    assert any("dist.all_reduce" in line for line in added)
    assert SOLUTION.strip().splitlines()[0] in shown.select_one(".solution-code").get_text()
    # Now open: the result of a Run links to the page instead of offering to give up.
    assert parse(ex_client.get(ran.headers["location"])).select_one(".see-solution") is not None
