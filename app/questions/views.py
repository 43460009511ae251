"""Learner pages: the topics by interview round with the quiz builder, and a topic's
questions (practising them is app.quizzes; the home page is app.progress's)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from sqlalchemy.orm import Session

from app.deps import SessionDep
from app.errors import NotFound
from app.questions import service
from app.questions.schema import QUESTION_TYPES, QUIZ_TYPES
from app.templating import templates

router = APIRouter(include_in_schema=False)


def builder_context(db_session: Session) -> dict[str, Any]:
    """What the quiz builder (/topics) lists: every topic by round, then group."""
    summaries = service.topic_summaries(db_session=db_session)
    return {"summaries": summaries, "rounds": service.topic_rounds(summaries),
            "total": sum(s.count for s in summaries), "types": QUIZ_TYPES}


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
