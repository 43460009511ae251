"""create_app(settings): wiring only."""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from sqlalchemy.exc import DataError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.routing import Match

from app.accounts import views as accounts_views
from app.authoring import views as authoring_views
from app.clock import Clock
from app.db import make_engine, make_sessionmaker, read_sessionmaker
from app.deps import LoginRequired
from app.errors import Busy, InvalidInput, NotFound, RateLimited, TooLarge
from app.identity import LearnerCookieMiddleware
from app.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from app.metrics import AppMetrics, address_in, parse_networks
from app.middleware import (
    OVERLOAD_RETRY_AFTER_S,
    AdmissionMiddleware,
    BufferedBodyMiddleware,
    RequestMetricsMiddleware,
    RequestSessionsMiddleware,
    SecurityHeadersMiddleware,
)
from app.practice import api as practice_api
from app.practice import progress_api, progress_views
from app.practice import views as practice_views
from app.questions import api as questions_api
from app.questions import views as questions_views
from app.render.markdown import pygments_css
from app.settings import Settings, get_settings
from app.templating import STATIC_DIR, templates
from app.verify import views as verify_views
from app.verify.engine import sandbox_status
from app.verify.knobs import InvalidKnob
from app.verify.service import queue_state
from app.verify.worker import WorkerPool, warm_engine
from app.wake import wake_folder

# Swagger UI for /docs, vendored and pinned (static/vendor/README.md).
SWAGGER_UI = "/static/vendor/swagger-ui-5.35.0"


def _wants_json(request: Request) -> bool:
    return request.url.path.startswith("/api/")


class SafeJSONResponse(JSONResponse):
    """JSON that escapes non-ASCII, so an error echoing a lone surrogate from the request
    is still valid UTF-8 rather than a 500."""

    def render(self, content: object) -> bytes:
        return json.dumps(content, ensure_ascii=True, separators=(",", ":")).encode()


def _slash_twin(app: FastAPI, request: Request) -> str | None:
    """The path with its trailing slash removed (or added) when that names a route."""
    path = request.url.path
    if request.method not in ("GET", "HEAD") or path == "/":
        return None
    twin = path.rstrip("/") if path.endswith("/") else path + "/"
    scope = {**request.scope, "path": twin}
    if any(route.matches(scope)[0] == Match.FULL for route in app.router.routes):
        return twin + (f"?{request.url.query}" if request.url.query else "")
    return None


def _busy(exc: Exception) -> bool:
    text = str(getattr(exc, "orig", exc)).lower()
    return "locked" in text or "busy" in text


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    engine = make_engine(settings.resolved_database_url, pool_size=settings.threads)
    # Said once, at start-up, before any run: whether snippets will be confined.
    sandbox, sandbox_message = sandbox_status(settings.sandbox)
    log = logging.getLogger("ddpdrill")
    if sandbox == "on":
        log.info(sandbox_message)
    else:
        log.error(sandbox_message)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # The views' thread pool and the database pool are sized together: every
        # thread can hold a connection, so no view waits for one while holding a thread.
        anyio.to_thread.current_default_thread_limiter().total_tokens = settings.threads
        # Of those threads, requests that may write use at most this many (deps.commit_when_done).
        app.state.write_limiter = anyio.CapacityLimiter(min(settings.write_threads, settings.threads))
        pool = None
        if settings.workers > 0:
            pool = WorkerPool(app.state.sessionmaker, settings, settings.workers)
            app.state.worker_pool = pool
            # Start the warm rank pool now, so the first Verify does not pay for it.
            threading.Thread(target=warm_engine, args=(settings.sandbox,), name="engine-warmup",
                             daemon=True).start()
            pool.start()
        yield
        if pool is not None:
            pool.shutdown(timeout=30)
        engine.dispose()

    app = FastAPI(title="DDP Drill", version="0.1.0", lifespan=lifespan,
                  docs_url=None, redoc_url=None, openapi_url="/api/v1/openapi.json")
    app.state.settings = settings
    # One clock for the learning loop; tests replace it (app.state.clock = FixedClock(...)).
    app.state.clock = Clock(settings.clock_offset_file)
    app.state.engine = engine
    app.state.sessionmaker = make_sessionmaker(engine)
    app.state.wake_folder = wake_folder(settings.resolved_database_url)
    app.state.read_sessionmaker = read_sessionmaker(engine)

    def read_queue() -> dict[str, Any]:
        with app.state.read_sessionmaker() as session:
            return queue_state(db_session=session)

    app.state.metrics = AppMetrics(read_queue)
    # Innermost: a session a refused request left open is closed before the refusal goes out.
    app.add_middleware(RequestSessionsMiddleware)
    app.add_middleware(LearnerCookieMiddleware, secret_key=settings.resolved_secret_key())
    # A request takes a slot only once its body is in, so slow clients hold no slot.
    app.add_middleware(AdmissionMiddleware, limit=settings.max_requests_in_flight,
                       wait_s=settings.admission_wait_s)
    # Outermost: a view never waits on a slow client's body while it holds the database.
    app.add_middleware(BufferedBodyMiddleware)
    app.add_middleware(SecurityHeadersMiddleware)
    # Outermost, so a request refused for overload is timed too.
    app.add_middleware(RequestMetricsMiddleware, metrics=app.state.metrics)
    if settings.allowed_host_list != ["*"]:
        # Outside the metrics, so a flood of made-up Host headers costs a 400 and nothing else.
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=settings.allowed_host_list)

    # A request is matched against the routes in this order, one by one: ~140 µs of
    # FastAPI's time to reach the last of them. So what a class sends most comes first:
    # the health probe, answers (API and form), question pages, then Verify. No path of
    # one router is matched by a route of another (tests/test_routes.py), so the order
    # changes nothing but the time.
    app.mount("/static", StaticFiles(directory=str(STATIC_DIR)), name="static")

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> dict[str, str]:
        # A read: on SQLite it must not queue behind writers to say the server is up.
        with app.state.read_sessionmaker() as session:
            session.connection().exec_driver_sql("SELECT 1")
        # "unavailable": pages work but Verify refuses to run snippets.
        return {"status": "ok", "sandbox": sandbox}

    app.include_router(practice_api.router)
    app.include_router(practice_views.router)
    app.include_router(questions_views.router)
    app.include_router(verify_views.api)
    app.include_router(verify_views.router)
    app.include_router(questions_api.router)
    app.include_router(practice_api.learning)
    app.include_router(progress_api.router)
    app.include_router(progress_views.router)
    app.include_router(accounts_views.router)
    app.include_router(authoring_views.router)
    # Signed-out visitors to /author and /admin are sent to the login page.
    app.add_exception_handler(LoginRequired, accounts_views.login_required)

    css = pygments_css()

    @app.get("/static-gen/pygments.css", include_in_schema=False)
    def pygments_stylesheet() -> Response:
        return PlainTextResponse(css, media_type="text/css",
                                 headers={"Cache-Control": "public, max-age=3600"})

    @app.get("/docs", include_in_schema=False)
    def api_docs() -> Response:
        # Swagger UI from static/ (vendored, pinned): FastAPI's default loads it from a CDN,
        # which leaves /docs blank on a machine without internet.
        return get_swagger_ui_html(
            openapi_url="/api/v1/openapi.json", title="DDP Drill API",
            swagger_js_url=f"{SWAGGER_UI}/swagger-ui-bundle.js",
            swagger_css_url=f"{SWAGGER_UI}/swagger-ui.css",
            swagger_favicon_url=f"{SWAGGER_UI}/favicon-32x32.png",
            swagger_ui_parameters={"validatorUrl": None})

    metrics_networks = parse_networks(settings.metrics_allow)

    @app.get("/metrics", include_in_schema=False)
    def metrics(request: Request) -> Response:
        if not address_in(request.client.host if request.client else "", metrics_networks):
            return PlainTextResponse("Metrics are for the operator's network (DDPDRILL_METRICS_ALLOW).",
                                     status_code=403)
        return Response(app.state.metrics.exposition(), media_type=METRICS_CONTENT_TYPE)

    # Starlette's own trailing-slash redirect builds an absolute URL from the Host
    # header, which a client controls; ours is relative.
    app.router.redirect_slashes = False

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 404 and (twin := _slash_twin(app, request)) is not None:
            return RedirectResponse(twin, status_code=307)
        if _wants_json(request):
            return SafeJSONResponse({"detail": exc.detail}, status_code=exc.status_code,
                                    headers=getattr(exc, "headers", None))
        return templates.TemplateResponse(
            request, "errors/error.html",
            {"status": exc.status_code, "detail": exc.detail}, status_code=exc.status_code,
        )

    def error_page(request: Request, status: int, detail: object,
                   headers: dict[str, str] | None = None) -> Response:
        if _wants_json(request):
            return SafeJSONResponse({"detail": detail}, status_code=status, headers=headers)
        return templates.TemplateResponse(request, "errors/error.html",
                                          {"status": status, "detail": detail}, status_code=status,
                                          headers=headers)

    @app.exception_handler(NotFound)
    async def not_found(request: Request, exc: NotFound) -> Response:
        return error_page(request, 404, str(exc))

    @app.exception_handler(RateLimited)
    async def rate_limited(request: Request, exc: RateLimited) -> Response:
        return error_page(request, 429, str(exc), {"Retry-After": str(exc.retry_after_s)})

    @app.exception_handler(InvalidInput)
    async def invalid_input(request: Request, exc: InvalidInput) -> Response:
        return error_page(request, 422, str(exc))

    @app.exception_handler(TooLarge)
    async def too_large(request: Request, exc: TooLarge) -> Response:
        return error_page(request, 413, str(exc))

    @app.exception_handler(InvalidKnob)
    async def invalid_knob(request: Request, exc: InvalidKnob) -> Response:
        if _wants_json(request):
            return error_page(request, 422, [{"loc": ["body", "params", exc.knob], "msg": exc.message,
                                              "type": "knob"}])
        return error_page(request, 422, str(exc))

    @app.exception_handler(Busy)
    async def busy(request: Request, exc: Busy) -> Response:
        return error_page(request, 503, str(exc), {"Retry-After": str(OVERLOAD_RETRY_AFTER_S)})

    @app.exception_handler(PoolTimeout)
    @app.exception_handler(OperationalError)
    @app.exception_handler(sqlite3.OperationalError)  # raised by our own writer lock
    async def database_busy(request: Request, exc: Exception) -> Response:
        # SQLite stayed locked past our wait, no pool connection came free in time, or the
        # database dropped the connection (a PostgreSQL restart; the pool has discarded the
        # old connections): the request did nothing, so the client may simply retry.
        if isinstance(exc, OperationalError | sqlite3.OperationalError) and not _busy(exc) \
                and not getattr(exc, "connection_invalidated", False):
            raise exc
        logging.getLogger("ddpdrill").warning("database busy on %s: %s", request.url.path, exc)
        return error_page(request, 503, "The server is busy; try again in a moment.",
                          {"Retry-After": str(OVERLOAD_RETRY_AFTER_S)})

    @app.exception_handler(OverflowError)
    @app.exception_handler(DataError)
    async def out_of_range(request: Request, exc: Exception) -> Response:
        # A number too large for the database's integer columns (an id in a URL, say):
        # whatever it names cannot exist.
        detail = "A number in the request is out of range."
        if _wants_json(request):
            return JSONResponse({"detail": detail}, status_code=422)
        return templates.TemplateResponse(request, "errors/error.html",
                                          {"status": 422, "detail": detail}, status_code=422)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> Response:
        errors = [
            {"loc": list(e.get("loc", [])), "msg": e.get("msg", ""), "type": e.get("type", "")}
            for e in exc.errors()
        ]
        if _wants_json(request):
            return SafeJSONResponse({"detail": errors}, status_code=422)
        return templates.TemplateResponse(
            request, "errors/error.html",
            {"status": 422, "detail": "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                                                for e in errors)},
            status_code=422,
        )

    return app
