"""Learner pages: the home page (today's work, or for a newcomer what DDP Drill is), the
topics by interview round with the quiz builder, and a topic's questions (practising them
is app.quizzes)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from sqlalchemy.orm import Session

from app.deps import ClockDep, CurrentLearner, SessionDep
from app.errors import NotFound
from app.progress import service as progress
from app.questions import service
from app.questions.schema import QUESTION_TYPES, QUIZ_TYPES
from app.templating import templates

router = APIRouter(include_in_schema=False)


def builder_context(db_session: Session) -> dict[str, Any]:
    """What the quiz builder (/topics) lists: every topic by round, then group."""
    summaries = service.topic_summaries(db_session=db_session)
    return {"summaries": summaries, "rounds": service.topic_rounds(summaries),
            "total": sum(s.count for s in summaries), "types": QUIZ_TYPES}


@router.get("/")
def home(request: Request, db_session: SessionDep, learner_id: CurrentLearner,
         clock: ClockDep) -> Response:
    """Today first: what is due, the plan's day, the streak and one Start button; a newcomer
    gets one sentence, a measured example of Verify and the DDP round instead."""
    summaries = service.topic_summaries(db_session=db_session)
    today = progress.today(db_session=db_session, learner_id=learner_id, now=clock.now())
    mastery = (progress.mastery_by_topic(db_session=db_session, learner_id=learner_id,
                                         now=clock.now()) if not today.newcomer else {})
    rounds = service.topic_rounds(summaries)
    return templates.TemplateResponse(request, "questions/home.html", {
        "t": today, "rounds": rounds, "total": sum(s.count for s in summaries),
        "round_mastery": {r.slug: _mean_mastery(r, mastery) for r in rounds},
        "example": progress.verify_example(db_session=db_session) if today.newcomer else None})


def _mean_mastery(r: service.RoundGroups, mastery: dict[str, float]) -> float:
    n = sum(t.count for t in r.topics)
    return sum(mastery.get(t.topic.slug, 0.0) * t.count for t in r.topics) / n if n else 0.0


@router.get("/topics")
def topics_page(request: Request, db_session: SessionDep) -> Response:
    """Every topic by interview round and group, each with a box to tick for a quiz."""
    return templates.TemplateResponse(request, "questions/topics.html", builder_context(db_session))


@router.get("/topics/{slug}")
def topic_page(
    request: Request, slug: str, db_session: SessionDep, difficulty: str = "",
    types: Annotated[list[str], Query()] = [],  # noqa: B006 (FastAPI copies query defaults)
) -> Response:
    topic = service.get_topic(db_session=db_session, slug=slug)
    if topic is None:
        raise NotFound(f"No topic called {slug!r}.")
    chosen_types = [t for t in types if t in QUESTION_TYPES]
    # Filters come from a form whose "any" is empty; anything unknown means no filter.
    level = int(difficulty) if difficulty in ("1", "2", "3") else None
    questions = service.list_published(db_session=db_session, topics=[slug], difficulty=level,
                                       types=chosen_types or None)
    total = len(service.list_published(db_session=db_session, topics=[slug]))
    return templates.TemplateResponse(
        request, "questions/topic.html",
        {"topic": topic, "questions": questions, "total": total, "types": QUESTION_TYPES,
         "filters": {"difficulty": level, "types": chosen_types}})
