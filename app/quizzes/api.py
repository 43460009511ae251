"""The attempts API (/api/v1): grade an answer and schedule its review card."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header
from fastapi.responses import JSONResponse

from app.deps import API_BUSY, API_ERROR, ClockDep, CurrentLearner, SessionDep
from app.quizzes.grading import correct_answer
from app.quizzes.presenting import published_or_404
from app.quizzes.schemas import AttemptIn, AttemptOut
from app.quizzes.service import AlreadyAnswered, answer_question

router = APIRouter(prefix="/api/v1", tags=["attempts"], responses=API_BUSY)


@router.post("/questions/{slug}/attempts", response_model=AttemptOut,
             responses={404: {"description": "No such published question.", **API_ERROR},
                        409: {"model": AttemptOut}, 422: {}})
def post_attempt(
    slug: str, body: AttemptIn, db_session: SessionDep, learner_id: CurrentLearner,
    clock: ClockDep, idempotency_key: Annotated[str | None, Header(max_length=64)] = None,
) -> AttemptOut | JSONResponse:
    """Grade an answer and schedule its review card. Replaying the same Idempotency-Key
    returns the first result with 409."""
    question = published_or_404(db_session, slug)
    doc = question.doc
    try:
        attempt, grade = answer_question(
            db_session=db_session, learner_id=learner_id, question=question,
            raw_answer=body.answer, token=idempotency_key, time_taken_ms=body.time_taken_ms,
            confidence=body.confidence, now=clock.now())
    except AlreadyAnswered as exc:
        a = exc.attempt
        out = AttemptOut(attempt_id=a.id, score=a.score, correct=a.correct, answer=a.answer,
                         correct_answer=correct_answer(doc), explanation=doc.explanation,
                         first_submission=False)
        return JSONResponse(out.model_dump(), status_code=409)
    return AttemptOut(attempt_id=attempt.id, score=grade.score, correct=grade.correct,
                      answer=grade.answer, correct_answer=correct_answer(doc),
                      explanation=doc.explanation)
