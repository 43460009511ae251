"""Typed dependencies shared by the views: the request's session, the learner, the signed-in
user, the clock, the parsed form, CSRF and the client's address."""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.routing import APIRoute
from sqlalchemy.orm import Session, sessionmaker
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.accounts.models import User
from app.accounts.sessions import read_session
from app.clock import Clock
from app.csrf import require_csrf
from app.db import REQUEST_SESSIONS, close_sessions
from app.practice.learners import account_learner_id
from app.settings import Settings

# Requests with these methods only read (the few GET views that write take WriteSessionDep).
READ_METHODS = {"GET", "HEAD", "OPTIONS"}


def _request_session(request: Request, factory: sessionmaker[Session]) -> Session:
    """A new session for the request, listed where the view's thread and the middleware find it.

    Made on the event loop: a session does no I/O until its first statement. It was a
    generator run in pool threads, which cost every request two hand-offs to a pool
    thread (enter and exit) besides the view's own (docs/performance.md). Who ends it:
    the view's own thread, as soon as the view returns (commit_when_done); when the view
    never runs, because a later dependency refused the request after an earlier one had
    read the database (the signed-in user, then CSRF), RequestSessionsMiddleware closes
    it before the refusal is sent, so no transaction (on SQLite, the writer) outlives
    its request.
    """
    state = request.scope.setdefault("state", {})
    session = factory()
    state.setdefault(REQUEST_SESSIONS, []).append(session)
    return session


async def get_session(request: Request) -> Session:
    """One transaction per request: committed when the view returns, rolled back on error.

    GET requests get a read-only session: on SQLite it takes no write lock.
    """
    state = request.app.state
    factory = state.read_sessionmaker if request.method in READ_METHODS else state.sessionmaker
    return _request_session(request, factory)


async def get_write_session(request: Request) -> Session:
    """A session that may write, for the GET views that do (on SQLite it begins IMMEDIATE)."""
    return _request_session(request, request.app.state.sessionmaker)


# The parameter commit_when_done adds to a view's signature to be handed the request.
_REQUEST_PARAM = "ddpdrill_request"


def commit_when_done(endpoint: Callable[..., Any], *, response_model: Any = None,
                     status_code: int | None = None) -> Callable[..., Any]:
    """Wrap a plain `def` view so the request's sessions commit (or, if it raised, roll
    back) in its own thread, as soon as it returns.

    Otherwise the commit runs when the session dependency exits, after FastAPI has
    validated the response in *another* pool thread: with every pool thread waiting
    for the database (on SQLite, for the write lock this request holds), that
    thread never comes and nothing commits. A commit that fails still fails the request.

    A view that returns an instance of its route's response model is serialized here too:
    FastAPI would validate it again in yet another pool thread, one more hand-off per API
    answer for a model the view has just built.
    """
    # FastAPI reads the view's parameters from the signature; resolve the string
    # annotations (`from __future__ import annotations`) in the view's own module.
    signature = inspect.signature(endpoint, eval_str=True)
    params = list(signature.parameters.values())
    own = next((p.name for p in params if p.annotation is Request), None)
    added = own is None
    request_param = own or _REQUEST_PARAM
    if added:
        params.append(inspect.Parameter(_REQUEST_PARAM, inspect.Parameter.KEYWORD_ONLY,
                                        annotation=Request))

    @functools.wraps(endpoint)
    def run_and_commit(*args: Any, **kwargs: Any) -> Any:
        request: Request = kwargs.pop(request_param) if added else kwargs[request_param]
        sessions: list[Session] = request.scope.get("state", {}).get(REQUEST_SESSIONS, [])
        try:
            result = endpoint(*args, **kwargs)
        except BaseException:
            close_sessions(sessions)  # rolls back what the view left open
            raise
        try:
            for session in sessions:
                if session.in_transaction():
                    session.commit()
        finally:
            close_sessions(sessions)
        if response_model is not None and type(result) is response_model:
            return Response(result.model_dump_json(by_alias=True), status_code=status_code or 200,
                            media_type="application/json")
        return result

    run_and_commit.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    return run_and_commit


class CommittingRoute(APIRoute):
    """The route class of every router: plain `def` views commit in their own thread."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        if not inspect.iscoroutinefunction(endpoint):
            endpoint = commit_when_done(endpoint, response_model=kwargs.get("response_model"),
                                        status_code=kwargs.get("status_code"))
        super().__init__(path, endpoint, **kwargs)


async def get_settings_dep(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def read_form(request: Request) -> AsyncIterator[FormData]:
    """The request's form, parsed on the event loop (the body is already in memory, see
    BufferedBodyMiddleware), so that the view itself can be a plain `def` in the thread pool.
    Uploaded files' temporary spools are closed once the response is sent."""
    form = await request.form()
    try:
        yield form
    finally:
        await form.close()


async def get_clock(request: Request) -> Clock:
    """The app's one clock (app/clock.py): what "now" is for reviews and due cards."""
    clock: Clock = request.app.state.clock
    return clock


# Committed in the view's thread before the response exists (commit_when_done), so a failed
# commit is an error the client sees rather than a success that silently lost its data.
SessionDep = Annotated[Session, Depends(get_session)]
WriteSessionDep = Annotated[Session, Depends(get_write_session)]
ClockDep = Annotated[Clock, Depends(get_clock)]
SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
FormDep = Annotated[FormData, Depends(read_form)]
# Add to every state-changing route: `_: CSRF`; tests enumerate routes to check it.
CSRF = Annotated[None, Depends(require_csrf)]


async def current_user(request: Request, db_session: SessionDep) -> User | None:
    """The signed-in, active user, or None for anyone else (anonymous learners included)."""
    session = read_session(request)
    if session is None:
        return None
    uid, version = session
    user = await run_in_threadpool(db_session.get, User, uid)
    if user is None or not user.active or user.session_version != version:
        return None
    return user


class LoginRequired(StarletteHTTPException):
    """Raised by the author and admin dependencies for a visitor who is not signed in.

    A 401 on its own; the app's handler for it (accounts.views.login_required) sends a
    browser's GET to the login page and tells htmx to go there.
    """

    def __init__(self) -> None:
        super().__init__(401, "Sign in as an author to see this page.")


async def require_author(user: Annotated[User | None, Depends(current_user)]) -> User:
    """Any signed-in author or admin; a learner account gets 403."""
    if user is None:
        raise LoginRequired()
    if not user.is_staff:
        raise HTTPException(403, "This page is for question authors; your account is a learner's.")
    return user


async def require_admin(user: Annotated[User, Depends(require_author)]) -> User:
    """A signed-in admin; an author gets 403."""
    if not user.is_admin:
        raise HTTPException(403, "Only an admin may do this.")
    return user


OptionalUser = Annotated[User | None, Depends(current_user)]
AuthorUser = Annotated[User, Depends(require_author)]
AdminUser = Annotated[User, Depends(require_admin)]


async def get_learner_id(request: Request, db_session: SessionDep, user: OptionalUser) -> str:
    """Whose practice this request is: a signed-in learner account's own learner identity
    (the same on every device), else the browser's anonymous one from the signed cookie
    (set by LearnerCookieMiddleware). Authors practise as their browser's identity."""
    if user is not None and user.is_learner:
        return await run_in_threadpool(account_learner_id, db_session=db_session, user_id=user.id)
    return str(request.state.learner_id)


CurrentLearner = Annotated[str, Depends(get_learner_id)]


async def require_learner_account(user: OptionalUser) -> User:
    """A signed-in learner account (the account pages); others are sent to sign in."""
    if user is None:
        raise LoginRequired()
    if not user.is_learner:
        raise HTTPException(403, "This page is for learner accounts; authors have /author.")
    return user


LearnerUser = Annotated[User, Depends(require_learner_account)]


def client_ip(request: Request) -> str:
    """The peer address. Behind a proxy this is the proxy's, unless uvicorn is started
    with --proxy-headers and a trusted --forwarded-allow-ips (docs/authoring.md)."""
    return (request.client.host if request.client else "") or "unknown"


def notify_workers(request: Request) -> None:
    """Wake this process's verify workers (if it has any) for a run just queued."""
    pool = getattr(request.app.state, "worker_pool", None)
    if pool is not None:
        pool.notify()


def is_htmx(request: Request) -> bool:
    """True when htmx made the request (it wants a fragment, not a page)."""
    return request.headers.get("HX-Request") == "true"


# OpenAPI: every API error has this shape, and any API call may be refused as busy
# (AdmissionMiddleware, or a database that stayed locked) with 503 and Retry-After.
API_ERROR: dict[str, Any] = {"content": {"application/json": {"schema": {
    "type": "object", "properties": {"detail": {}}, "required": ["detail"]}}}}
API_BUSY: dict[int | str, dict[str, Any]] = {
    503: {"description": "The server is at capacity; retry after Retry-After seconds.", **API_ERROR}}
