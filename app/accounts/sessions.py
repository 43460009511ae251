"""The signed session cookie of a signed-in account.

The session is a cookie of its own (not the learner cookie): the user id and the
user's session version, signed with the app key (salt "session") and timestamped.
Bumping `User.session_version` (logout, deactivation, a role change) turns every
cookie issued before it into a stranger's.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request, Response
from itsdangerous import BadSignature, URLSafeTimedSerializer

from app.accounts.models import User

SESSION_COOKIE = "ddpdrill_session"
# A working day: an author's tab left open overnight asks for the password again.
SESSION_MAX_AGE = 12 * 3600


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
