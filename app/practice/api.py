"""The JSON API for attempts (/api/v1)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, HTTPException
from fastapi.responses import JSONResponse

from app.deps import API_BUSY, API_ERROR, CommittingRoute, CurrentLearner, SessionDep
from app.practice.grading import InvalidAnswer, correct_answer
from app.practice.schemas import AttemptIn, AttemptOut
from app.practice.service import AlreadyAnswered, answer_question
from app.questions import service as questions_service

router = APIRouter(prefix="/api/v1", tags=["attempts"], responses=API_BUSY, route_class=CommittingRoute)


@router.post("/questions/{slug}/attempts", response_model=AttemptOut,
             responses={404: {"description": "No such published question.", **API_ERROR},
                        409: {"model": AttemptOut}, 422: {}})
def post_attempt(
    slug: str, body: AttemptIn, db_session: SessionDep, learner_id: CurrentLearner,
    idempotency_key: Annotated[str | None, Header(max_length=64)] = None,
) -> AttemptOut | JSONResponse:
    """Grade an answer. Replaying the same Idempotency-Key returns the first result with 409."""
    question = questions_service.get_published(db_session=db_session, slug=slug)
    if question is None or question.current_revision is None:
        raise HTTPException(404, f"No question called {slug!r}.")
    doc = questions_service.revision_doc(question.current_revision)
    try:
        attempt, grade = answer_question(
            db_session=db_session, learner_id=learner_id, question=question,
            raw_answer=body.answer, token=idempotency_key, time_taken_ms=body.time_taken_ms)
    except InvalidAnswer as exc:
        raise HTTPException(422, str(exc)) from None
    except AlreadyAnswered as exc:
        a = exc.attempt
        out = AttemptOut(attempt_id=a.id, score=a.score, correct=a.correct, answer=a.answer,
                         correct_answer=correct_answer(doc), explanation=doc.explanation,
                         first_submission=False)
        return JSONResponse(out.model_dump(), status_code=409)
    return AttemptOut(attempt_id=attempt.id, score=grade.score, correct=grade.correct,
                      answer=grade.answer, correct_answer=correct_answer(doc),
                      explanation=doc.explanation)
