"""The anonymous learner identity: a random id in a signed, HttpOnly cookie."""

from __future__ import annotations

import uuid

from itsdangerous import BadSignature, URLSafeSerializer
from starlette.requests import cookie_parser
from starlette.types import ASGIApp, Message, Receive, Scope, Send

LEARNER_COOKIE = "ddpdrill_learner"
# A year: long enough that a returning learner keeps their history.
LEARNER_COOKIE_MAX_AGE = 365 * 24 * 3600


def signed_learner(secret_key: str, learner_id: str) -> str:
    """The cookie value that names this learner."""
    return str(URLSafeSerializer(secret_key, salt="learner").dumps(learner_id))


def fresh_learner_cookie(secret_key: str) -> tuple[str, str]:
    """(new learner id, its cookie value): a browser that signs out of a learner account, or
    deletes it, gets a new anonymous identity, so the next person at it sees nothing of theirs."""
    learner = str(uuid.uuid4())
    return learner, signed_learner(secret_key, learner)


class LearnerCookieMiddleware:
    """Gives every visitor a signed learner id, reusing a valid one from the cookie."""

    def __init__(self, app: ASGIApp, secret_key: str) -> None:
        self.app = app
        self.serializer = URLSafeSerializer(secret_key, salt="learner")

    def _read(self, scope: Scope) -> str | None:
        for name, value in scope.get("headers", []):
            if name == b"cookie":
                # Starlette's lenient parser, as Request.cookies uses: SimpleCookie drops every
                # cookie of the header when one is malformed (say, another local app's value
                # with a space), which cost the learner their identity on every request.
                signed = cookie_parser(value.decode("latin-1")).get(LEARNER_COOKIE)
                if signed is None:
                    continue
                try:
                    learner = self.serializer.loads(signed)
                except BadSignature:
                    return None
                if isinstance(learner, str):
                    try:
                        return str(uuid.UUID(learner))
                    except ValueError:
                        return None
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        learner = self._read(scope)
        fresh = learner is None
        if learner is None:
            learner = str(uuid.uuid4())
        scope.setdefault("state", {})["learner_id"] = learner
        secure = scope.get("scheme") == "https"

        async def send_with_cookie(message: Message) -> None:
            if fresh and message["type"] == "http.response.start":
                cookie = (
                    f"{LEARNER_COOKIE}={self.serializer.dumps(learner)}; Path=/; "
                    f"Max-Age={LEARNER_COOKIE_MAX_AGE}; HttpOnly; SameSite=Lax"
                    + ("; Secure" if secure else "")
                )
                message.setdefault("headers", []).append((b"set-cookie", cookie.encode()))
            await send(message)

        await self.app(scope, receive, send_with_cookie)
