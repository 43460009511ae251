"""Typed dependencies shared by the views: the request's session and the learner."""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.routing import APIRoute
from sqlalchemy.orm import Session
from starlette.datastructures import FormData

from app.csrf import require_csrf
from app.db import session_scope
from app.settings import Settings

# Requests with these methods only read (the few GET views that write take WriteSessionDep).
READ_METHODS = {"GET", "HEAD", "OPTIONS"}


def get_session(request: Request) -> Iterator[Session]:
    """One transaction per request: committed when the view returns, rolled back on error."""
    state = request.app.state
    factory = state.read_sessionmaker if request.method in READ_METHODS else state.sessionmaker
    with session_scope(factory) as session:
        yield session


def get_write_session(request: Request) -> Iterator[Session]:
    """A session that may write, for the GET views that do (on SQLite it begins IMMEDIATE)."""
    with session_scope(request.app.state.sessionmaker) as session:
        yield session


def commit_when_done(endpoint: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a plain `def` view so its sessions commit in its own thread, as soon as it returns.

    Otherwise the commit runs when the session dependency exits, after FastAPI has
    validated the response in *another* pool thread: with every pool thread waiting
    for the database (on SQLite, for the write lock this request holds), that
    thread never comes and nothing commits. A commit that fails still fails the request.
    """

    @functools.wraps(endpoint)
    def run_and_commit(*args: Any, **kwargs: Any) -> Any:
        result = endpoint(*args, **kwargs)
        for value in kwargs.values():
            if isinstance(value, Session) and value.in_transaction():
                value.commit()
        return result

    # FastAPI reads the view's parameters from the signature; resolve the string
    # annotations (`from __future__ import annotations`) in the view's own module.
    run_and_commit.__signature__ = inspect.signature(endpoint, eval_str=True)  # type: ignore[attr-defined]
    return run_and_commit


async def read_form(request: Request) -> AsyncIterator[FormData]:
    """The request's form, parsed on the event loop so that a plain `def` view can use it.

    Views that touch the database are plain functions run in the thread pool: a
    blocking database call inside an `async def` view stalls every request.
    Uploaded files' temporary spools are closed when the request ends.
    """
    async with request.form() as form:
        yield form


def get_learner_id(request: Request) -> str:
    """The anonymous learner's id from the signed cookie (set by LearnerCookieMiddleware)."""
    return str(request.state.learner_id)


def get_settings_dep(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


# scope="function" commits before the response is sent, so a failed commit is an error
# the client sees rather than a success that silently lost its data.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
FormDep = Annotated[FormData, Depends(read_form)]
WriteSessionDep = Annotated[Session, Depends(get_write_session, scope="function")]
CurrentLearner = Annotated[str, Depends(get_learner_id)]
SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
# Add to every state-changing route: `_: CSRF`; tests enumerate routes to check it.
CSRF = Annotated[None, Depends(require_csrf)]


def is_htmx(request: Request) -> bool:
    """True when htmx made the request (it wants a fragment, not a page)."""
    return request.headers.get("HX-Request") == "true"


# OpenAPI: every API error has this shape, and any API call may be refused as busy
# (AdmissionMiddleware, or a database that stayed locked) with 503 and Retry-After.
API_ERROR: dict[str, Any] = {"content": {"application/json": {"schema": {
    "type": "object", "properties": {"detail": {}}, "required": ["detail"]}}}}
API_BUSY: dict[int | str, dict[str, Any]] = {
    503: {"description": "The server is at capacity; retry after Retry-After seconds.", **API_ERROR}}


class CommittingRoute(APIRoute):
    """The route class of every router: plain `def` views commit in their own thread."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        if not inspect.iscoroutinefunction(endpoint):
            endpoint = commit_when_done(endpoint)
        super().__init__(path, endpoint, **kwargs)
