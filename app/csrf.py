"""CSRF protection for every state-changing browser request.

The token is the learner id signed with the app's key (salt "csrf"): stateless,
bound to the visitor's own signed cookie, so a page on another site cannot
produce it. Forms carry it as `csrf_token`; htmx sends it as the X-CSRF-Token
header (base.html sets hx-headers). The JSON API under /api/v1 takes no CSRF
dependency (a cross-site page cannot send `application/json` without a CORS
preflight, which this app never grants); every route that does take one is a
form route, so a request claiming to be JSON is checked like any other: the
content type is the client's word, not proof of where the request came from.
"""

from __future__ import annotations

import functools

from fastapi import HTTPException, Request
from itsdangerous import BadSignature, URLSafeSerializer

CSRF_FIELD = "csrf_token"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = {"GET", "HEAD", "OPTIONS", "TRACE"}


@functools.lru_cache(maxsize=4)
def _serializer_for(secret_key: str) -> URLSafeSerializer:
    return URLSafeSerializer(secret_key, salt="csrf")


def _serializer(request: Request) -> URLSafeSerializer:
    return _serializer_for(request.app.state.settings.resolved_secret_key())


def csrf_token(request: Request) -> str:
    """The token this visitor's forms must send back.

    Signed once per request and kept in its state: a question page has several forms.
    """
    learner_id = str(request.state.learner_id)
    state = request.scope.setdefault("state", {})
    signed = state.get("csrf_token")
    if signed is None or signed[0] != learner_id:  # signing in changes the learner mid-request
        signed = state["csrf_token"] = (learner_id, str(_serializer(request).dumps(learner_id)))
    return str(signed[1])


def _valid(request: Request, token: object) -> bool:
    if not isinstance(token, str) or not token:
        return False
    try:
        return bool(_serializer(request).loads(token) == str(request.state.learner_id))
    except BadSignature:
        return False


async def require_csrf(request: Request) -> None:
    """Refuse a state-changing browser request without this visitor's token (403)."""
    if request.method in SAFE_METHODS:
        return
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if _valid(request, request.headers.get(CSRF_HEADER)):
        return
    if content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
        form = await request.form()
        if _valid(request, form.get(CSRF_FIELD)):
            return
    raise HTTPException(
        403, "This form has expired or came from another site; reload the page and try again."
    )
