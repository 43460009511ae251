"""Typed dependencies shared by the views: the request's session, the learner, the signed-in
user, the clock, the parsed form, CSRF and the client's address."""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any

import anyio
import anyio.to_thread
from fastapi import Depends, HTTPException, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.routing import APIRoute
from sqlalchemy.orm import Session
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.accounts.models import User
from app.accounts.sessions import read_session
from app.clock import Clock
from app.csrf import require_csrf
from app.db import REQUEST_SESSIONS, RequestSessions
from app.errors import Busy
from app.practice.learners import account_learner_id
from app.settings import Settings
from app.wake import wake_all

# Requests with these methods only read (the few GET views that write take WriteSessionDep).
READ_METHODS = {"GET", "HEAD", "OPTIONS"}


def request_sessions(request: Request) -> RequestSessions:
    """The request's sessions (app/db.py RequestSessions), kept in its state.

    Who ends them: the view's own thread, as soon as the view returns (commit_when_done);
    when the view never runs, because a later dependency refused the request after an
    earlier one had read the database (the signed-in user, then CSRF),
    RequestSessionsMiddleware closes them before the refusal is sent, so no transaction
    (on SQLite, the writer) outlives its request.
    """
    state = request.scope.setdefault("state", {})
    sessions: RequestSessions | None = state.get(REQUEST_SESSIONS)
    if sessions is None:
        app_state = request.app.state
        sessions = state[REQUEST_SESSIONS] = RequestSessions(app_state.sessionmaker,
                                                             app_state.read_sessionmaker)
    return sessions


def request_session(request: Request, *, write: bool = False) -> Session:
    """The request's session: one that may write for a POST (or when asked), else a read-only
    one. Call it in the thread that uses the session."""
    return request_sessions(request).get(write=write or request.method not in READ_METHODS)


async def get_session(request: Request) -> Session:
    """One transaction per request: committed when the view returns, rolled back on error.

    GET requests get a read-only session: on SQLite it takes no write lock. A plain `def`
    view never calls this: commit_when_done hands it the session in its own thread.
    """
    return request_session(request)


async def get_write_session(request: Request) -> Session:
    """A session that may write, for the GET views that do (on SQLite it begins IMMEDIATE)."""
    return request_session(request, write=True)


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
    # The view's sessions are made here, in its thread, not by FastAPI on the event loop.
    session_params = {p.name: p.annotation is WriteSessionDep for p in signature.parameters.values()
                      if p.annotation is SessionDep or p.annotation is WriteSessionDep}
    params = [p for p in signature.parameters.values() if p.name not in session_params]
    own = next((p.name for p in params if p.annotation is Request), None)
    added = own is None
    request_param = own or _REQUEST_PARAM
    if added:
        params.append(inspect.Parameter(_REQUEST_PARAM, inspect.Parameter.KEYWORD_ONLY,
                                        annotation=Request))

    @functools.wraps(endpoint)
    def run_and_commit(*args: Any, **kwargs: Any) -> Any:
        request: Request = kwargs.pop(request_param) if added else kwargs[request_param]
        sessions = request_sessions(request)
        for name, write in session_params.items():
            kwargs[name] = request_session(request, write=write)
        try:
            result = endpoint(*args, **kwargs)
        except BaseException:
            sessions.close()  # rolls back what the view left open
            raise
        try:
            sessions.commit()
        finally:
            sessions.close()
        if response_model is not None and type(result) is response_model:
            return Response(result.model_dump_json(by_alias=True), status_code=status_code or 200,
                            media_type="application/json")
        return result

    @functools.wraps(endpoint)
    async def dispatch(*args: Any, **kwargs: Any) -> Any:
        request: Request = kwargs[request_param]
        call = functools.partial(run_and_commit, *args, **kwargs)
        writers: anyio.CapacityLimiter | None = getattr(request.app.state, "write_limiter", None)
        if writers is None or request.method in ("GET", "HEAD"):
            return await anyio.to_thread.run_sync(call)
        # Requests that may write run a few at a time (DDPDRILL_WRITE_THREADS) and the
        # rest wait here, on the event loop, in order of arrival. With every one of 32
        # threads inside a view, each view shared the interpreter with 31 others and SQLite's
        # writer went to whichever thread woke first: an answer took ~100 ms of wall time for
        # 3 ms of work, and the unlucky ones far longer (docs/performance.md). GET requests
        # and /healthz keep the whole pool, so writes queued behind a locked database never
        # hold up pages. The wait is bounded like admission's: past it, 503 and Retry-After.
        acquired = False
        with anyio.move_on_after(request.app.state.settings.admission_wait_s):
            await writers.acquire()
            acquired = True
        if not acquired:
            raise Busy("The server is busy; try again in a moment.")
        try:
            return await anyio.to_thread.run_sync(call)
        finally:
            writers.release()

    dispatch.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    return dispatch


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


def _signed_in_user(request: Request, uid: int, version: int) -> User | None:
    user = request_session(request).get(User, uid)
    if user is None or not user.active or user.session_version != version:
        return None
    return user


async def current_user(request: Request) -> User | None:
    """The signed-in, active user, or None for anyone else (anonymous learners included)."""
    session = read_session(request)
    if session is None:
        return None
    uid, version = session
    return await run_in_threadpool(_signed_in_user, request, uid, version)


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


def _account_learner(request: Request, user_id: int) -> str:
    return account_learner_id(db_session=request_session(request), user_id=user_id)


async def get_learner_id(request: Request, user: OptionalUser) -> str:
    """Whose practice this request is: a signed-in learner account's own learner identity
    (the same on every device), else the browser's anonymous one from the signed cookie
    (set by LearnerCookieMiddleware). Authors practise as their browser's identity."""
    if user is not None and user.is_learner:
        return await run_in_threadpool(_account_learner, request, user.id)
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
    """Wake the verify workers for a run just queued: this process's by an event, and on
    SQLite every other process's too (PostgreSQL's NOTIFY wakes those, at commit)."""
    pool = getattr(request.app.state, "worker_pool", None)
    if pool is not None:
        pool.notify()
    folder = request.app.state.wake_folder
    if folder is not None:
        wake_all(folder)


def is_htmx(request: Request) -> bool:
    """True when htmx made the request (it wants a fragment, not a page)."""
    return request.headers.get("HX-Request") == "true"


# OpenAPI: every API error has this shape, and any API call may be refused as busy
# (AdmissionMiddleware, or a database that stayed locked) with 503 and Retry-After.
API_ERROR: dict[str, Any] = {"content": {"application/json": {"schema": {
    "type": "object", "properties": {"detail": {}}, "required": ["detail"]}}}}
API_BUSY: dict[int | str, dict[str, Any]] = {
    503: {"description": "The server is at capacity; retry after Retry-After seconds.", **API_ERROR}}
