"""Typed dependencies shared by the views: the request's session, the learner, the signed-in
user, the clock, the parsed form, CSRF and the client's address.

The request path (docs/architecture.md): middleware (app.middleware) → these dependencies →
the view (a plain `def`, run in the thread pool) → services → models. The session is a
yield dependency with `scope="function"`: FastAPI runs its exit — commit, or roll back if
the view raised — after the view returns and before the response is sent, so a failed
commit is an error the client sees, never a success that lost its data.
"""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

import anyio
import anyio.to_thread
from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool
from sqlalchemy.orm import Session
from starlette.datastructures import FormData

from app.accounts.models import User
from app.accounts.service import account_learner_id
from app.accounts.sessions import read_session
from app.clock import Clock
from app.csrf import require_csrf
from app.errors import Busy, Forbidden, LoginRequired
from app.settings import Settings

# Requests with these methods only read; the few GET views that write take WriteSessionDep.
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _finish(session: Session, commit: bool) -> None:
    try:
        if commit and session.in_transaction():
            session.commit()
    finally:
        session.close()  # rolls back whatever is still open


@asynccontextmanager
async def _session(request: Request, *, write: bool) -> AsyncIterator[Session]:
    """One transaction per request, committed when the view returns, rolled back if it raised.

    Making the session does no I/O (it connects on first use, in the view's thread), so it
    is made here on the event loop; the commit runs in a pool thread.

    A request that may write first takes one of the process's write slots
    (DDPDRILL_WRITE_THREADS), held until its commit. On SQLite this makes the process's
    writers take turns in order of arrival, instead of sleeping in SQLite's busy handler
    (which wakes them in no order, in growing steps): measured, an answer's tail latency
    depends on it (docs/performance.md). The wait is bounded like admission's: past it,
    503 with Retry-After, never a stall.
    """
    state = request.app.state
    # A semaphore, not a CapacityLimiter: a yield dependency's exit may run in another task
    # than its start, and a limiter's token belongs to the task that took it.
    limiter: anyio.Semaphore | None = getattr(state, "write_slots", None)
    slot = write and limiter is not None
    if slot:
        assert limiter is not None
        acquired = False
        with anyio.move_on_after(state.settings.admission_wait_s):
            await limiter.acquire()
            acquired = True
        if not acquired:
            raise Busy("The server is busy; try again in a moment.")
    session: Session = (state.sessionmaker if write else state.read_sessionmaker)()
    try:
        try:
            yield session
        except BaseException:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(_finish, session, False)
            raise
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(_finish, session, True)
    finally:
        if slot:
            assert limiter is not None
            limiter.release()


async def get_session(request: Request) -> AsyncIterator[Session]:
    """The request's session: one that may write for any method but GET/HEAD/OPTIONS."""
    # `async with`, not `async for`: the view's exception must reach _session's cleanup now,
    # not whenever the garbage collector finalizes a suspended generator (which left
    # SQLite's write lock held after a refused request).
    async with _session(request, write=request.method not in READ_METHODS) as session:
        yield session


async def get_write_session(request: Request) -> AsyncIterator[Session]:
    """A session that may write, for the GET views that do (on SQLite it begins IMMEDIATE)."""
    async with _session(request, write=True) as session:
        yield session


SessionDep = Annotated[Session, Depends(get_session, scope="function")]
WriteSessionDep = Annotated[Session, Depends(get_write_session, scope="function")]


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


ClockDep = Annotated[Clock, Depends(get_clock)]
SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
FormDep = Annotated[FormData, Depends(read_form)]
# Add to every state-changing route: `_: CSRF`; tests enumerate routes to check it.
CSRF = Annotated[None, Depends(require_csrf)]


def _signed_in_user(db_session: Session, uid: int, version: int) -> User | None:
    user = db_session.get(User, uid)
    if user is None or not user.active or user.session_version != version:
        return None
    return user


async def current_user(request: Request, db_session: SessionDep) -> User | None:
    """The signed-in, active user, or None for anyone else (anonymous learners included)."""
    session = read_session(request)
    if session is None:
        return None
    uid, version = session
    return await run_in_threadpool(_signed_in_user, db_session, uid, version)


async def require_author(user: Annotated[User | None, Depends(current_user)]) -> User:
    """Any signed-in author or admin; a learner account gets 403."""
    if user is None:
        raise LoginRequired("Sign in as an author to see this page.")
    if not user.is_staff:
        raise Forbidden("This page is for question authors; your account is a learner's.")
    return user


async def require_admin(user: Annotated[User, Depends(require_author)]) -> User:
    """A signed-in admin; an author gets 403."""
    if not user.is_admin:
        raise Forbidden("Only an admin may do this.")
    return user


OptionalUser = Annotated[User | None, Depends(current_user)]
AuthorUser = Annotated[User, Depends(require_author)]
AdminUser = Annotated[User, Depends(require_admin)]


async def get_learner_id(request: Request, user: OptionalUser, db_session: SessionDep) -> str:
    """Whose practice this request is: a signed-in learner account's own learner identity
    (the same on every device), else the browser's anonymous one from the signed cookie
    (set by LearnerCookieMiddleware). Authors practise as their browser's identity."""
    if user is not None and user.is_learner:
        return await run_in_threadpool(lambda: account_learner_id(db_session=db_session,
                                                                  user_id=user.id))
    return str(request.state.learner_id)


CurrentLearner = Annotated[str, Depends(get_learner_id)]


async def require_learner_account(user: OptionalUser) -> User:
    """A signed-in learner account (the account pages); others are sent to sign in."""
    if user is None:
        raise LoginRequired("Sign in to see your account.")
    if not user.is_learner:
        raise Forbidden("This page is for learner accounts; authors have /author.")
    return user


LearnerUser = Annotated[User, Depends(require_learner_account)]


async def require_instructor(user: OptionalUser) -> User:
    """A signed-in instructor (the class pages, app/classes); any other account gets 403."""
    if user is None:
        raise LoginRequired("Sign in as an instructor to see your classes.")
    if not user.is_instructor:
        raise Forbidden("This page is for instructors.")
    return user


InstructorUser = Annotated[User, Depends(require_instructor)]


async def require_grader(user: OptionalUser) -> User:
    """A signed-in instructor or admin: marking a class's talk-throughs (app/classes/grading.py;
    an instructor reaches only their own classes, an admin every class)."""
    if user is None:
        raise LoginRequired("Sign in as the class's instructor to mark its answers.")
    if not (user.is_instructor or user.is_admin):
        raise Forbidden("Marking a class's answers is for its instructor.")
    return user


GraderUser = Annotated[User, Depends(require_grader)]


def client_ip(request: Request) -> str:
    """The peer address every per-address limit counts by. Behind a proxy this is the proxy's,
    unless `serve` is told to believe the proxy's X-Forwarded-For
    (DDPDRILL_FORWARDED_ALLOW_IPS; never by default).

    An IPv6 address counts as its /64: one host is usually given a whole /64 and can pick
    any of its 2^64 addresses, so counting each alone would let one machine have as many
    shares of every limit as it likes."""
    return address_key((request.client.host if request.client else "") or "unknown")


def address_key(host: str) -> str:
    """`host` as the limits count it: an IPv4 address as itself, an IPv6 one as its /64
    (an IPv4-mapped IPv6 address as the IPv4 address)."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


def notify_workers(request: Request) -> None:
    """Wake this process's verify workers for a run just queued (PostgreSQL's NOTIFY, sent at
    commit, wakes every other process's). Called as a background task, after the commit:
    a worker woken sooner would find no run yet and sleep until its next poll."""
    pool = getattr(request.app.state, "worker_pool", None)
    if pool is not None:
        pool.notify()


def is_htmx(request: Request) -> bool:
    """True when htmx made the request (it wants a fragment, not a page)."""
    return request.headers.get("HX-Request") == "true"


# OpenAPI: every API error has this shape, and any API call may be refused as busy
# (AdmissionMiddleware, a full write queue, or a database that stayed locked) with 503.
API_ERROR: dict[str, Any] = {"content": {"application/json": {"schema": {
    "type": "object", "properties": {"detail": {}}, "required": ["detail"]}}}}
API_BUSY: dict[int | str, dict[str, Any]] = {
    503: {"description": "The server is at capacity; retry after Retry-After seconds.", **API_ERROR}}
