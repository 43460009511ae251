"""The JSON API for questions (/api/v1); attempts are app.quizzes.api."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.deps import API_BUSY, API_ERROR, CurrentLearner, SessionDep
from app.errors import NotFound
from app.questions import service
from app.questions.models import Question, QuestionRevision
from app.questions.schemas import (
    ExerciseOut,
    KnobOut,
    QuestionOut,
    QuestionSummaryOut,
    asked_fields,
)
from app.quizzes import service as practice

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
            responses={404: {"description": "No such published question.", **API_ERROR},
                       422: {"description": "No such variant.", **API_ERROR}})
def get_question(
    slug: str, db_session: SessionDep, learner_id: CurrentLearner,
    variant: Annotated[int | None, Query(ge=0, le=1000, description=(
        "Which variant (default: the one drawn for you, as the question page shows it)"))] = None,
) -> QuestionOut:
    """One variant of a question, with its own numbers, without its answer key or explanation.

    A case shows the parts revealed to you so far; a talk-through its model answer and rubric
    once you have sent your text."""
    question = _get_or_404(db_session, slug)
    revision = question.current_revision
    assert revision is not None
    template = service.revision_doc(revision)
    if variant is None:
        variant = practice.drawn_variant(db_session=db_session, learner_id=learner_id,
                                         question_id=question.id, count=template.variant_count)
    doc = service.revision_variant(revision=revision,
                                   variant=practice.check_variant(template, variant))
    state = None
    if doc.is_case or doc.is_talk:
        partial = practice.partial_answer(db_session=db_session, learner_id=learner_id,
                                          question_id=question.id)
        if partial is not None and partial.variant == variant:
            # Under way on the revision it began on.
            began = db_session.get(QuestionRevision, partial.revision_id)
            assert began is not None
            doc, state = service.revision_variant(revision=began, variant=variant), partial.state
    knobs = [
        KnobOut(name=name, label=k.label or name, values=k.values, default=k.default)
        for name, k in (doc.verify.knobs.items() if doc.verify else [])
    ]
    exercise = None
    if doc.exercise is not None and doc.verify is not None:
        exercise = ExerciseOut(
            starter=doc.snippet_text or "", hints=list(doc.exercise.hints),
            visible_checks=[e.label for e in doc.verify.expect if not e.hidden],
            hidden_checks=sum(1 for e in doc.verify.expect if e.hidden),
            run_url=f"/api/v1/exercises/{slug}/run")
    return QuestionOut(
        **_summary(question).model_dump(), revision=revision.number, exercise=exercise,
        knobs=knobs, **asked_fields(doc, variant=variant, variant_count=template.variant_count,
                                    state=state))
