"""ASGI middleware: read request bodies up front, and send security headers."""

from __future__ import annotations

import asyncio
import json
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.metrics import AppMetrics

# The largest body any route takes: a zipped bank upload (5 MB) and its form overhead.
MAX_BODY_BYTES = 6 * 1024 * 1024
# A client gets this long to send its whole body. Views may hold a database
# transaction (on SQLite, the write lock) while they read the form, so a body that
# trickles in must not reach them.
BODY_READ_TIMEOUT_S = 10.0

CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
       "img-src 'self' data:; object-src 'none'; base-uri 'self'; form-action 'self'; "
       "frame-ancestors 'none'")
# Swagger UI at /docs loads its own scripts; it shows no user content.
CSP_EXEMPT_PREFIXES = ("/docs", "/redoc")


async def _reject(send: Send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


def _encodable_json(scope: Scope, body: bytes) -> bool:
    """False for a JSON body whose strings cannot be encoded as UTF-8: JSON may escape a lone
    surrogate (\\ud800), which Python decodes into a str that later fails wherever it is
    stored, hashed or compiled. Checked once here rather than in every field of every API."""
    if b"\\u" not in body or b"\\ud" not in body.lower():
        return True
    content_type = next((v for k, v in scope.get("headers", []) if k == b"content-type"), b"")
    if b"json" not in content_type:
        return True
    try:
        json.dumps(json.loads(body), ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    except ValueError:
        return True  # not JSON at all: the view's own validation answers it
    return True


class BufferedBodyMiddleware:
    """Reads the whole request body (capped, with a deadline) before the app sees the request."""

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES,
                 timeout_s: float = BODY_READ_TIMEOUT_S) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await _reject(send, 413, f"The request body is larger than {self.max_bytes} bytes.")
                return
        chunks: list[bytes] = []
        size = 0

        async def read_all() -> bool:
            nonlocal size
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return False
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > self.max_bytes:
                    return False
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return True

        try:
            # asyncio.timeout, not wait_for: no task of its own per request.
            async with asyncio.timeout(self.timeout_s):
                complete = await read_all()
        except TimeoutError:
            await _reject(send, 408, "The request body did not arrive in time.")
            return
        if not complete:
            if size > self.max_bytes:
                await _reject(send, 413, f"The request body is larger than {self.max_bytes} bytes.")
            return
        body = b"".join(chunks)
        if not _encodable_json(scope, body):
            await _reject(send, 422, "The request contains text that is not valid Unicode "
                                     "(a lone surrogate such as \\ud800).")
            return
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


# Paths that must answer even when the app is at capacity: probes, metrics and files.
ADMISSION_EXEMPT_PREFIXES = ("/healthz", "/metrics", "/static")
# What a client refused for overload is told to wait before trying again.
OVERLOAD_RETRY_AFTER_S = 1


async def overloaded(send: Send, detail: str = "The server is busy; try again in a moment.") -> None:
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": 503,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"retry-after", str(OVERLOAD_RETRY_AFTER_S).encode())]})
    await send({"type": "http.response.body", "body": body})


class AdmissionMiddleware:
    """At most `limit` requests in the app at once; the next ones wait up to `wait_s`, then get 503.

    Past capacity, queueing without bound only turns a busy server into one that answers
    every request after 30 s; a quick 503 with Retry-After lets clients back off.
    """

    def __init__(self, app: ASGIApp, limit: int, wait_s: float) -> None:
        self.app = app
        self.wait_s = wait_s
        self.slots = asyncio.Semaphore(limit)
        self.limit = limit

    @property
    def in_flight(self) -> int:
        return self.limit - self.slots._value

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(ADMISSION_EXEMPT_PREFIXES):
            await self.app(scope, receive, send)
            return
        if self.slots.locked():  # at capacity: wait for a slot, a bounded time
            try:
                async with asyncio.timeout(self.wait_s):
                    await self.slots.acquire()
            except TimeoutError:
                await overloaded(send)
                return
        else:
            await self.slots.acquire()  # a free slot: taken at once, no timer

        try:
            await self.app(scope, receive, send)
        finally:
            self.slots.release()


# How long a 429 is held back before it is sent (LateRefusalMiddleware).
REFUSAL_DELAY_S = 0.25
_wait = asyncio.sleep  # (a test records the waits instead)


class LateRefusalMiddleware:
    """Every 429 goes out REFUSAL_DELAY_S late. A client that ignores Retry-After and asks again
    at once (a flood) would otherwise spend the cores on refusals, and slow every other
    learner. The refusal is held here, outside admission: by the time it waits, its request
    has left its admission slot, its write slot and its database session, so a waiting
    refusal holds nothing but its own connection."""

    def __init__(self, app: ASGIApp, delay_s: float = REFUSAL_DELAY_S) -> None:
        self.app = app
        self.delay_s = delay_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        held: list[Message] = []

        async def hold_refusal(message: Message) -> None:
            if held or (message["type"] == "http.response.start" and message["status"] == 429):
                held.append(message)
                return
            await send(message)

        await self.app(scope, receive, hold_refusal)
        if held:
            await _wait(self.delay_s)
            for message in held:
                await send(message)


class SecurityHeadersMiddleware:
    """A Content-Security-Policy and friends on every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        exempt = scope["path"].startswith(CSP_EXEMPT_PREFIXES)

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = message.setdefault("headers", [])
                headers.append((b"x-content-type-options", b"nosniff"))
                headers.append((b"referrer-policy", b"same-origin"))
                if not exempt:
                    headers.append((b"content-security-policy", CSP.encode()))
                    headers.append((b"x-frame-options", b"DENY"))
            await send(message)

        await self.app(scope, receive, with_headers)


# The methods /metrics labels by name; anything else a client sends counts as "other", so
# made-up method names cannot grow the exposition (or the server's memory) without bound.
METRIC_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class RequestMetricsMiddleware:
    """Times every request and labels it with its method (from a fixed set) and its route
    template (never the raw path: unmatched paths share one label)."""

    def __init__(self, app: ASGIApp, metrics: AppMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def record_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, record_status)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "(unmatched)"
            method = scope["method"] if scope["method"] in METRIC_METHODS else "other"
            self.metrics.requests.labels(method, template, str(status)).observe(
                time.perf_counter() - start)
