"""Passwords, the signed session cookie, and the dependencies that admit authors and admins.

The session is a cookie of its own (not the learner cookie): the user id and the
user's session version, signed with the app key (salt "session") and timestamped.
Bumping `User.session_version` (logout, deactivation, a role change) turns every
cookie issued before it into a stranger's.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request, Response
from itsdangerous import BadSignature, URLSafeTimedSerializer
from pwdlib import PasswordHash
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.authoring.models import User
from app.deps import SessionDep

SESSION_COOKIE = "ddpdrill_session"
# A working day: an author's tab left open overnight asks for the password again.
SESSION_MAX_AGE = 12 * 3600

# argon2id with pwdlib's recommended parameters. Tests swap in cheaper parameters
# of the same algorithm (tests/authoring/conftest.py) to stay fast.
password_hasher = PasswordHash.recommended()


def hash_password(password: str) -> str:
    return str(password_hasher.hash(password))


def verify_password(password: str, password_hash: str) -> bool:
    try:
        return bool(password_hasher.verify(password, password_hash))
    except Exception:  # an unknown or corrupt hash is a failed login, not a crash
        return False


@lru_cache(maxsize=4)
def _dummy_hash(hasher_id: int) -> str:
    return password_hasher.hash("not-a-real-password")


def burn_verify(password: str) -> None:
    """Spend the time a real check takes, so an unknown username is not faster to reject."""
    verify_password(password, _dummy_hash(id(password_hasher)))


def _serializer(request: Request) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(request.app.state.settings.resolved_secret_key(), salt="session")


def set_session_cookie(response: Response, request: Request, user: User) -> None:
    """Sign the user in on this browser."""
    value = _serializer(request).dumps({"u": user.id, "v": user.session_version})
    response.set_cookie(
        SESSION_COOKIE, value, max_age=SESSION_MAX_AGE, path="/", httponly=True, samesite="lax",
        secure=request.url.scheme == "https",
    )


def clear_session_cookie(response: Response, request: Request) -> None:
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="lax",
                           secure=request.url.scheme == "https")


def read_session(request: Request) -> tuple[int, int] | None:
    """(user id, session version) from a valid, unexpired session cookie."""
    raw = request.cookies.get(SESSION_COOKIE)
    if not raw:
        return None
    try:
        data: Any = _serializer(request).loads(raw, max_age=SESSION_MAX_AGE)
    except BadSignature:  # includes SignatureExpired
        return None
    if not isinstance(data, dict):
        return None
    uid, version = data.get("u"), data.get("v")
    if not isinstance(uid, int) or not isinstance(version, int):
        return None
    return uid, version


def current_user(request: Request, db_session: SessionDep) -> User | None:
    """The signed-in, active user, or None for anyone else (learners included)."""
    session = read_session(request)
    if session is None:
        return None
    uid, version = session
    user = db_session.get(User, uid)
    if user is None or not user.active or user.session_version != version:
        return None
    return user


class LoginRequired(StarletteHTTPException):
    """Raised by the author and admin dependencies for a visitor who is not signed in.

    A 401 on its own; the app's handler for it (views.login_required) sends a
    browser's GET to the login page and tells htmx to go there.
    """

    def __init__(self) -> None:
        super().__init__(401, "Sign in as an author to see this page.")


def require_author(user: Annotated[User | None, Depends(current_user)]) -> User:
    """Any signed-in author or admin."""
    if user is None:
        raise LoginRequired()
    return user


def require_admin(user: Annotated[User, Depends(require_author)]) -> User:
    """A signed-in admin; an author gets 403."""
    if not user.is_admin:
        raise HTTPException(403, "Only an admin may do this.")
    return user


OptionalUser = Annotated[User | None, Depends(current_user)]
AuthorUser = Annotated[User, Depends(require_author)]
AdminUser = Annotated[User, Depends(require_admin)]


def client_ip(request: Request) -> str:
    """The peer address. Behind a proxy this is the proxy's, unless uvicorn is started
    with --proxy-headers and a trusted --forwarded-allow-ips (docs/authoring.md)."""
    return (request.client.host if request.client else "") or "unknown"
