"""Feedback that teaches, through the API as a learner: expected against measured for each
combination, the learner's own frames of a traceback only, and the reference solution with a
diff once the learner solved it, gave up, or failed three Runs — never before."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.exercises.service import RUNS_BEFORE_SOLUTION, own_frames
from app.quizzes.models import Attempt
from app.review.models import ReviewCard
from app.settings import Settings
from app.verify.worker import Worker
from tests.exercises.conftest import SLUG, SOLUTION, STARTER
from tests.factories import count


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
