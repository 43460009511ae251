"""create_app(settings): wiring only."""

from __future__ import annotations

import gc
import json
import logging
import sqlite3
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import quote

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
from app.classes import api as classes_api
from app.classes import views as classes_views
from app.clock import Clock
from app.db import make_engine, make_sessionmaker, read_sessionmaker
from app.errors import Busy, DomainError, InvalidInput, LoginRequired
from app.exercises import api as exercises_api
from app.exercises import views as exercises_views
from app.identity import LearnerCookieMiddleware
from app.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from app.metrics import AppMetrics, address_in, parse_networks
from app.middleware import (
    AdmissionMiddleware,
    BufferedBodyMiddleware,
    LateRefusalMiddleware,
    RequestMetricsMiddleware,
    SecurityHeadersMiddleware,
)
from app.mock import api as mock_api
from app.mock import views as mock_views
from app.planner import api as planner_api
from app.planner import views as planner_views
from app.progress import api as progress_api
from app.progress import views as progress_views
from app.questions import api as questions_api
from app.questions import views as questions_views
from app.quizzes import api as quizzes_api
from app.quizzes import views as quizzes_views
from app.quizzes.models import CONFIDENCE_LEVELS
from app.render.markdown import pygments_css
from app.reports import api as reports_api
from app.reports import views as reports_views
from app.reports.models import REPORT_KINDS
from app.review import api as review_api
from app.review import views as review_views
from app.review.worker import FitWorker
from app.settings import Settings, get_settings
from app.stats import api as stats_api
from app.stats import views as stats_views
from app.templating import STATIC_DIR, templates
from app.verify import views as verify_views
from app.verify.engine import sandbox_status
from app.verify.queue import queue_state
from app.verify.worker import WorkerPool, warm_engine

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


def _database_busy(exc: Exception) -> bool:
    """Whether a database error means "try again" rather than a bug: SQLite stayed locked by
    another process, no pooled connection came free in time, or the server dropped the
    connection (a PostgreSQL restart; the pool has discarded the old ones)."""
    if isinstance(exc, PoolTimeout) or getattr(exc, "connection_invalidated", False):
        return True
    orig = getattr(exc, "orig", None)
    return isinstance(orig, sqlite3.OperationalError) and getattr(
        orig, "sqlite_errorcode", None) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def render_error(request: Request, status: int, detail: object,
                 headers: dict[str, str] | None = None) -> Response:
    """The one way every error is answered: JSON `{"detail": ...}` under /api/, else the error
    page (an htmx request gets the same page, which its error swap shows)."""
    if _wants_json(request):
        return SafeJSONResponse({"detail": detail}, status_code=status, headers=headers)
    if not isinstance(detail, str):
        detail = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in detail)  # type: ignore[attr-defined]
    return templates.TemplateResponse(request, "errors/error.html",
                                      {"status": status, "detail": detail}, status_code=status,
                                      headers=headers)


def _to_login(request: Request, exc: LoginRequired) -> Response:
    """A visitor who must sign in: a browser's GET goes to the login page, htmx is told to
    go there, anything else gets 401."""
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    login = f"/login?next={quote(target, safe='')}"
    if request.headers.get("HX-Request") == "true":
        return Response(status_code=401, headers={"HX-Redirect": login})
    if request.method == "GET" and not _wants_json(request):
        return RedirectResponse(login, status_code=303)
    return render_error(request, 401, exc.message)


def create_app(settings: Settings | None = None, *, freeze_heap: bool = False) -> FastAPI:
    """The web app. `freeze_heap` (the served app, not the tests' many): once started, the
    objects alive then (the modules, the app, its routes and templates) are moved out of the
    garbage collector's reach (gc.freeze). Otherwise each full collection walks every one of
    them again, and a page that builds many objects (a large class's page) triggers many."""
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
        # Of those threads, requests that may write use at most this many (deps.get_session).
        slots = min(settings.write_threads, settings.threads)
        app.state.write_slots = anyio.Semaphore(slots, max_value=slots)
        pool = None
        if settings.workers > 0:
            pool = WorkerPool(app.state.sessionmaker, settings, settings.workers)
            app.state.worker_pool = pool
            # Start the warm rank pool now, so the first Verify does not pay for it.
            threading.Thread(target=warm_engine, args=(settings.sandbox,), name="engine-warmup",
                             daemon=True).start()
            pool.start()
            fits = FitWorker(app.state.sessionmaker, settings, clock=app.state.clock)
            fits.start()
        if freeze_heap:
            gc.collect()
            gc.freeze()
        yield
        if pool is not None:
            pool.shutdown(timeout=30)
            fits.shutdown(timeout=30)
        engine.dispose()

    app = FastAPI(title="DDP Drill", version="0.1.0", lifespan=lifespan,
                  docs_url=None, redoc_url=None, openapi_url="/api/v1/openapi.json")
    app.state.settings = settings
    # One clock for the learning loop; tests replace it (app.state.clock = FixedClock(...)).
    app.state.clock = Clock(settings.clock_offset_file)
    app.state.engine = engine
    app.state.sessionmaker = make_sessionmaker(engine)
    app.state.read_sessionmaker = read_sessionmaker(engine)

    def read_queue() -> dict[str, Any]:
        with app.state.read_sessionmaker() as session:
            return queue_state(db_session=session)

    app.state.metrics = AppMetrics(read_queue)
    # Words of two features that pages of several others show (the confidence control, the
    # report form under a graded answer).
    templates.env.globals.update(confidence_levels=CONFIDENCE_LEVELS, report_kinds=REPORT_KINDS)
    app.add_middleware(LearnerCookieMiddleware, secret_key=settings.resolved_secret_key())
    # A request takes a slot only once its body is in, so slow clients hold no slot.
    app.add_middleware(AdmissionMiddleware, limit=settings.max_requests_in_flight,
                       wait_s=settings.admission_wait_s)
    # Outside admission: a 429 waits to be sent without holding a slot.
    app.add_middleware(LateRefusalMiddleware)
    # Outermost: a view never waits on a slow client's body while it holds the database.
    app.add_middleware(BufferedBodyMiddleware)
    app.add_middleware(SecurityHeadersMiddleware)
    # Outermost, so a request refused for overload is timed too.
    app.add_middleware(RequestMetricsMiddleware, metrics=app.state.metrics)
    if settings.allowed_host_list != ["*"]:
        # Outside the metrics, so a flood of made-up Host headers costs a 400 and nothing else.
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=settings.allowed_host_list)

    app.mount("/static", StaticFiles(directory=str(STATIC_DIR)), name="static")

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> dict[str, str]:
        # A read: on SQLite it must not queue behind writers to say the server is up.
        with app.state.read_sessionmaker() as session:
            session.connection().exec_driver_sql("SELECT 1")
        # "unavailable": pages work but Verify refuses to run snippets.
        return {"status": "ok", "sandbox": sandbox}

    # No path of one router is matched by a route of another (tests/test_routes.py).
    for router in (accounts_views.router, authoring_views.router,
                   classes_api.router, classes_views.router,
                   exercises_api.router, exercises_views.router,
                   mock_api.router, mock_views.router,
                   planner_api.router, planner_views.router,
                   progress_api.router, progress_views.router,
                   questions_api.router, questions_views.router,
                   quizzes_api.router, quizzes_views.router,
                   reports_api.router, reports_views.router,
                   review_api.router, review_views.router,
                   stats_api.router, stats_views.router,
                   verify_views.api, verify_views.router):
        app.include_router(router)

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

    @app.exception_handler(DomainError)
    async def domain_error(request: Request, exc: DomainError) -> Response:
        if isinstance(exc, LoginRequired):
            return _to_login(request, exc)
        detail: object = exc.message
        if isinstance(exc, InvalidInput) and exc.loc is not None and _wants_json(request):
            detail = [{"loc": ["body", *exc.loc], "msg": exc.message, "type": "value_error"}]
        return render_error(request, exc.status, detail, exc.headers or None)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 404 and (twin := _slash_twin(app, request)) is not None:
            return RedirectResponse(twin, status_code=307)
        return render_error(request, exc.status_code, exc.detail, getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> Response:
        return render_error(request, 422, [
            {"loc": list(e.get("loc", [])), "msg": e.get("msg", ""), "type": e.get("type", "")}
            for e in exc.errors()])

    @app.exception_handler(PoolTimeout)
    @app.exception_handler(OperationalError)
    async def database_error(request: Request, exc: Exception) -> Response:
        if not _database_busy(exc):
            raise exc
        # The request did nothing, so the client may simply retry.
        log.warning("database busy on %s: %s", request.url.path, exc)
        busy = Busy("The server is busy; try again in a moment.")
        return render_error(request, busy.status, busy.message, busy.headers)

    @app.exception_handler(OverflowError)
    @app.exception_handler(DataError)
    async def out_of_range(request: Request, exc: Exception) -> Response:
        # A number too large for the database's integer columns (an id in a URL, say):
        # whatever it names cannot exist.
        return render_error(request, 422, "A number in the request is out of range.")

    return app


def served_app() -> FastAPI:
    """The app as `ddpdrill serve` runs it in each of several processes (uvicorn's factory)."""
    return create_app(freeze_heap=True)
