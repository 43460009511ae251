"""The JSON API for questions and attempts (/api/v1)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, HTTPException, Query, Request
from fastapi.responses import JSONResponse

from app.deps import API_BUSY, API_ERROR, CommittingRoute, CurrentLearner, SessionDep
from app.practice.grading import InvalidAnswer, correct_answer, tolerance_text
from app.practice.service import AlreadyAnswered, answer_question
from app.questions import service
from app.questions.models import Question
from app.questions.schemas import (
    AttemptIn,
    AttemptOut,
    ChoiceOut,
    KnobOut,
    QuestionOut,
    QuestionSummaryOut,
)

NOT_FOUND = {"description": "No such published question.", **API_ERROR}
router = APIRouter(prefix="/api/v1", tags=["questions"], responses=API_BUSY,
                   route_class=CommittingRoute)


def _summary(q: Question) -> QuestionSummaryOut:
    return QuestionSummaryOut(slug=q.slug, topic=q.topic, title=q.title, difficulty=q.difficulty,
                              type=q.type, tags=list(q.tags or []), has_snippet=q.has_snippet,
                              url=f"/questions/{q.slug}")


@router.get("/questions", response_model=list[QuestionSummaryOut])
def list_questions(
    db_session: SessionDep,
    topic: Annotated[list[str] | None, Query()] = None,
    tag: str | None = None,
    difficulty: Annotated[int | None, Query(ge=1, le=3)] = None,
) -> list[QuestionSummaryOut]:
    """Published questions, filtered by topic (repeatable), tag and difficulty."""
    return [_summary(q) for q in service.list_published(
        db_session=db_session, topics=topic, tag=tag, difficulty=difficulty)]


def _get_or_404(db_session: SessionDep, slug: str) -> Question:
    question = service.get_published(db_session=db_session, slug=slug)
    if question is None:
        raise HTTPException(404, f"No question called {slug!r}.")
    return question


@router.get("/questions/{slug}", response_model=QuestionOut, responses={404: NOT_FOUND})
def get_question(slug: str, db_session: SessionDep) -> QuestionOut:
    """One question without its answer key or explanation."""
    question = _get_or_404(db_session, slug)
    assert question.current_revision is not None
    doc = service.revision_doc(question.current_revision)
    knobs = [
        KnobOut(name=name, label=k.label or name, values=k.values, default=k.default)
        for name, k in (doc.verify.knobs.items() if doc.verify else [])
    ]
    numeric = doc.effective_format == "numeric"
    return QuestionOut(
        **_summary(question).model_dump(), revision=question.current_revision.number,
        answer_format=doc.effective_format, prompt=doc.prompt,
        choices=[ChoiceOut(key=c.key, text=c.text) for c in doc.choices],
        unit=doc.answer.unit if numeric and doc.answer else None,
        tolerance=tolerance_text(doc) if numeric else None, trace=doc.trace, knobs=knobs,
    )


@router.post("/questions/{slug}/attempts", response_model=AttemptOut,
             responses={404: NOT_FOUND, 409: {"model": AttemptOut}, 422: {}})
def post_attempt(
    slug: str, body: AttemptIn, request: Request, db_session: SessionDep,
    learner_id: CurrentLearner,
    idempotency_key: Annotated[str | None, Header(max_length=64)] = None,
) -> AttemptOut | JSONResponse:
    """Grade an answer. Replaying the same Idempotency-Key returns the first result with 409."""
    question = _get_or_404(db_session, slug)
    assert question.current_revision is not None
    doc = service.revision_doc(question.current_revision)
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
