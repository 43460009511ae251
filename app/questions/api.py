"""The JSON API for questions (/api/v1); attempts are app.quizzes.api."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.deps import API_BUSY, API_ERROR, SessionDep
from app.errors import NotFound
from app.questions import service
from app.questions.models import Question
from app.questions.schemas import (
    ChoiceOut,
    ExerciseOut,
    KnobOut,
    QuestionOut,
    QuestionSummaryOut,
)
from app.quizzes.grading import tolerance_text

router = APIRouter(prefix="/api/v1", tags=["questions"], responses=API_BUSY)


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
        raise NotFound(f"No question called {slug!r}.")
    return question


@router.get("/questions/{slug}", response_model=QuestionOut,
            responses={404: {"description": "No such published question.", **API_ERROR}})
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
    exercise = None
    if doc.exercise is not None and doc.verify is not None:
        exercise = ExerciseOut(
            starter=doc.snippet_text or "", hints=list(doc.exercise.hints),
            visible_checks=[e.label for e in doc.verify.expect if not e.hidden],
            hidden_checks=sum(1 for e in doc.verify.expect if e.hidden),
            run_url=f"/api/v1/exercises/{slug}/run")
    return QuestionOut(
        **_summary(question).model_dump(), revision=question.current_revision.number,
        answer_format="exercise" if doc.is_exercise else doc.effective_format, prompt=doc.prompt,
        exercise=exercise,
        choices=[ChoiceOut(key=c.key, text=c.text) for c in doc.choices],
        unit=doc.answer.unit if numeric and doc.answer else None,
        tolerance=tolerance_text(doc) if numeric else None, trace=doc.trace, knobs=knobs,
    )
