"""The exercises API (/api/v1): run your code against an exercise's checks, read the result."""

from __future__ import annotations

import dataclasses

from fastapi import APIRouter, BackgroundTasks, Request

from app.deps import (
    API_BUSY,
    CurrentLearner,
    SessionDep,
    SettingsDep,
    WriteSessionDep,
    client_ip,
    notify_workers,
)
from app.exercises import service as exercise
from app.exercises.schemas import (
    ExerciseRunIn,
    ExerciseRunOut,
    GiveUpIn,
    ProgressOut,
    SolutionOut,
    SubmissionOut,
)
from app.verify.models import RUN_DONE, RUN_FAILED
from app.verify.service import PrivateCaps

router = APIRouter(prefix="/api/v1", tags=["exercises"], responses=API_BUSY)


@router.post("/exercises/{slug}/run", response_model=ExerciseRunOut,
          responses={404: {}, 413: {}, 429: {}})
def run_exercise_api(
    slug: str, body: ExerciseRunIn, request: Request, background: BackgroundTasks,
    db_session: SessionDep, settings: SettingsDep, learner_id: CurrentLearner,
) -> ExerciseRunOut:
    """Run your code against the exercise's checks (one run per audited knob combination)."""
    runs = exercise.submit(db_session=db_session, slug=slug, code=body.code, learner_id=learner_id,
                           client_ip=client_ip(request),
                           limit_per_minute=settings.exercise_rate_per_minute,
                           caps=PrivateCaps.from_settings(settings))
    if any(r.status != RUN_DONE for r in runs):
        background.add_task(notify_workers, request)  # after the commit
    token = "-".join(str(r.id) for r in runs)
    done = all(r.status in (RUN_DONE, RUN_FAILED) for r in runs)
    return ExerciseRunOut(submission=token, run_ids=[r.id for r in runs],
                          status="done" if done else "pending",
                          url=f"/api/v1/exercises/{slug}/submissions/{token}")


@router.get("/exercises/{slug}/submissions/{token}", response_model=SubmissionOut,
         responses={404: {}})
def exercise_submission_api(slug: str, token: str, db_session: WriteSessionDep,
                            learner_id: CurrentLearner) -> SubmissionOut:
    """Your Run's checks: each visible one with what was measured; hidden ones as counts."""
    sub = exercise.submission(db_session=db_session, slug=slug, token=token, learner_id=learner_id)
    return SubmissionOut.model_validate({
        "submission": sub.token, "status": "done" if sub.done else "pending", "passed": sub.passed,
        "infrastructure_failed": sub.infrastructure_failed,
        "visible": [c.to_json() for c in sub.visible], "hidden_total": sub.hidden_total,
        "hidden_passed": sub.hidden_passed, "run_ids": [r.id for r in sub.runs],
        "attempt_id": sub.attempt_id,
        "error": dataclasses.asdict(sub.error) if sub.error is not None else None,
        "mistakes": sub.mistakes, "graded": sub.graded,
        "progress": _progress(sub.progress) if sub.progress is not None else None})


def _progress(p: exercise.Progress) -> ProgressOut:
    return ProgressOut(failed_runs=p.failed_runs, passed=p.passed, solution_open=p.solution_open,
                       runs_until_solution=p.runs_until_solution)


def _solution(s: exercise.Solution) -> SolutionOut:
    return SolutionOut(solution=s.code, your_code=s.mine, diff=s.diff)


@router.get("/exercises/{slug}/solution", response_model=SolutionOut, responses={403: {}, 404: {}})
def exercise_solution_api(slug: str, db_session: WriteSessionDep,
                          learner_id: CurrentLearner) -> SolutionOut:
    """The reference solution and a diff from your newest Run's code: once you solved the
    exercise, gave up, or failed three Runs (403 before)."""
    return _solution(exercise.solution(db_session=db_session, slug=slug, learner_id=learner_id))


@router.post("/exercises/{slug}/give-up", response_model=SolutionOut, responses={404: {}, 422: {}})
def exercise_give_up_api(slug: str, body: GiveUpIn, db_session: SessionDep,
                         learner_id: CurrentLearner) -> SolutionOut:
    """Give up: recorded as a failed attempt (review brings the exercise back soon); the
    reference solution and a diff from your code open."""
    return _solution(exercise.give_up(db_session=db_session, slug=slug, learner_id=learner_id,
                                      code=body.code))
