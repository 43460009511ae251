"""Learner pages: the home page and a topic's questions (practising them is app.practice)."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import Response

from app.deps import CommittingRoute, SessionDep
from app.questions import service
from app.templating import templates

router = APIRouter(include_in_schema=False, route_class=CommittingRoute)


@router.get("/")
def home(request: Request, db_session: SessionDep) -> Response:
    summaries = service.topic_summaries(db_session=db_session)
    total = sum(s.count for s in summaries)
    return templates.TemplateResponse(
        request, "questions/home.html", {"summaries": summaries, "total": total}
    )


@router.get("/topics/{slug}")
def topic_page(request: Request, slug: str, db_session: SessionDep) -> Response:
    topic = service.get_topic(db_session=db_session, slug=slug)
    if topic is None:
        raise HTTPException(404, f"No topic called {slug!r}.")
    questions = service.list_published(db_session=db_session, topics=[slug])
    return templates.TemplateResponse(
        request, "questions/topic.html", {"topic": topic, "questions": questions}
    )
