"""Typed dependencies shared by the views: the request's session and the learner."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from app.csrf import require_csrf
from app.db import session_scope
from app.settings import Settings


def get_session(request: Request) -> Iterator[Session]:
    """One transaction per request: committed when the view returns, rolled back on error."""
    with session_scope(request.app.state.sessionmaker) as session:
        yield session


def get_learner_id(request: Request) -> str:
    """The anonymous learner's id from the signed cookie (set by LearnerCookieMiddleware)."""
    return str(request.state.learner_id)


def get_settings_dep(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


# scope="function" commits before the response is sent, so a failed commit is an error
# the client sees rather than a success that silently lost its data.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
CurrentLearner = Annotated[str, Depends(get_learner_id)]
SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
# Add to every state-changing route: `_: CSRF`; tests enumerate routes to check it.
CSRF = Annotated[None, Depends(require_csrf)]


def is_htmx(request: Request) -> bool:
    """True when htmx made the request (it wants a fragment, not a page)."""
    return request.headers.get("HX-Request") == "true"
