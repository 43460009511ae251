"""Feedback that teaches, through the API as a learner: expected against measured for each
combination, the learner's own frames of a traceback only, and the reference solution with a
diff once the learner solved it, gave up, or failed three Runs — never before."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import yaml
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.db import session_scope
from app.exercises.service import RUNS_BEFORE_SOLUTION
from app.questions.models import Question
from app.quizzes.models import Attempt
from app.review.models import ReviewCard
from app.settings import Settings
from app.verify import gate, service
from app.verify.results import own_frames
from app.verify.worker import Worker
from tests.exercises.helpers import SLUG, SOLUTION, STARTER
from tests.factories import REAL_BANK, count, form_fields, import_folder, parse


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


# ---------------------------------------------------------------- known mistakes


def test_a_failed_run_that_measures_what_a_known_wrong_solution_measured_names_its_mistake(
    app_client: TestClient, session_factory: sessionmaker[Session], settings: Settings,
    tmp_path: Path,
) -> None:
    """The gate runs (and caches) every wrong solution; a learner's failed Run that measured the
    same on every combination is told that solution's `why`, never its code. Before the gate
    ran, and for a failure no wrong solution shares, nothing is named."""
    slug = "reduce-vs-all-reduce"
    folder = REAL_BANK / "exercises"
    shutil.copytree(folder, tmp_path / "bank" / "exercises")
    import_folder(session_factory, tmp_path / "bank")
    doc = yaml.safe_load((folder / "reduce-vs-all-reduce.yaml").read_text())
    averages = next(w for w in doc["exercise"]["wrong"] if w["file"] == "reduce_wrong_averages.py")
    code = (folder / averages["file"]).read_text()

    def submit(text: str) -> dict[str, Any]:
        r = app_client.post(f"/api/v1/exercises/{slug}/run", json={"code": text})
        assert r.status_code == 200, r.text
        worker = Worker(session_factory, settings)
        while worker.run_once():
            pass
        body = app_client.get(r.json()["url"]).json()
        assert body["status"] == "done" and not body["infrastructure_failed"], body
        return dict(body)

    # Before the gate has run the wrong solutions there is nothing to compare with.
    assert submit(code + "\n# before the gate\n")["mistakes"] == []
    versions = service.engine_versions()
    with session_scope(session_factory) as s:
        q = s.scalar(select(Question).where(Question.slug == slug))
        assert q is not None and q.current_revision is not None
        gate.request_runs(db_session=s, revision=q.current_revision, versions=versions,
                          requested_by="test")
    worker = Worker(session_factory, settings)
    while worker.run_once():
        pass
    # The same mistake written by the learner (a comment of their own, so a run of their own).
    body = submit(code + "\n# my own attempt\n")
    assert body["passed"] is False
    assert body["mistakes"] == [averages["why"]]
    # Its reason, not its file or its code.
    assert averages["file"] not in json.dumps(body) and "all_reduce(" not in json.dumps(body)
    # A failure no known-wrong solution shares names none.
    starter = (folder / doc["verify"]["snippet"]).read_text()
    other = submit(starter.replace("dist.reduce(", "dist.all_reduce(").replace(", dst=0", "")
                   + "\nscale = 0.5\n")
    assert other["passed"] is False and other["mistakes"] == []
