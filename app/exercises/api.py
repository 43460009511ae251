"""The exercises API (/api/v1): run your code against an exercise's checks, read the result."""

from __future__ import annotations

from fastapi import APIRouter, BackgroundTasks, Request

from app.deps import API_BUSY, CurrentLearner, SessionDep, SettingsDep, client_ip, notify_workers
from app.exercises.schemas import ExerciseRunIn, ExerciseRunOut, SubmissionOut
from app.verify import exercise
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
def exercise_submission_api(slug: str, token: str, db_session: SessionDep,
                            learner_id: CurrentLearner) -> SubmissionOut:
    """Your Run's checks: each visible one with what was measured; hidden ones as counts."""
    sub = exercise.submission(db_session=db_session, slug=slug, token=token, learner_id=learner_id)
    return SubmissionOut.model_validate({
        "submission": sub.token, "status": "done" if sub.done else "pending", "passed": sub.passed,
        "infrastructure_failed": sub.infrastructure_failed,
        "visible": [c.to_json() for c in sub.visible], "hidden_total": sub.hidden_total,
        "hidden_passed": sub.hidden_passed, "run_ids": [r.id for r in sub.runs],
        "attempt_id": sub.attempt_id})
