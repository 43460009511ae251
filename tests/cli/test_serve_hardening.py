"""Regression tests for what the classroom load probe found outside authoring."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker
from starlette.types import Message, Receive, Scope, Send

from app.accounts import service as accounts
from app.db import session_scope
from app.middleware import AdmissionMiddleware
from app.ratelimit import RateHit
from tests.factories import parse, run_async
from tests.loadclient import Client, csrf_of
from tests.servers import Server

WRONG = "not the password"


def test_a_knob_named_with_a_lone_surrogate_is_a_422_not_a_500(
    app_client: TestClient, loaded: None,
) -> None:
    response = app_client.post("/api/v1/questions/fixture-single/verify",
                               content=b'{"params":{"\\ud800":1}}',
                               headers={"content-type": "application/json"})
    assert response.status_code == 422
    # Refused before any view (app.middleware: every JSON body's text must be valid Unicode).
    assert "not valid Unicode" in response.json()["detail"]


def test_the_trailing_slash_redirect_ignores_the_host_header(app_client: TestClient) -> None:
    response = app_client.get("/admin/users/?x=1", headers={"Host": "evil.example"},
                              follow_redirects=False)
    assert response.status_code == 307
    assert response.headers["location"] == "/admin/users?x=1"
    assert app_client.get("/no/such/page/", follow_redirects=False).status_code == 404


@pytest.mark.parametrize("path", ["/quizzes", "/logout"])
def test_a_json_content_type_does_not_skip_the_csrf_check(
    app_client: TestClient, loaded: None, path: str,
) -> None:
    app_client.get("/")  # a learner cookie, but no token
    response = app_client.post(path, content=b'{"count": 3}',
                               headers={"content-type": "application/json"}, follow_redirects=False)
    assert response.status_code == 403


def test_the_openapi_schema_lists_the_errors_the_api_returns(app_client: TestClient) -> None:
    paths = app_client.get("/api/v1/openapi.json").json()["paths"]
    for path, methods in paths.items():
        for method, op in methods.items():
            codes = set(op["responses"])
            assert "503" in codes, (method, path)
            if "{" in path:
                assert "404" in codes, (method, path)


def test_admission_refuses_past_capacity_with_503_and_retry_after() -> None:
    release = asyncio.Event()
    inside: list[str] = []
    arrived = asyncio.Condition()

    async def slow_app(scope: Scope, receive: Receive, send: Send) -> None:
        async with arrived:
            inside.append(scope["path"])
            arrived.notify_all()
        await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    middleware = AdmissionMiddleware(slow_app, limit=2, wait_s=0.2)

    async def call(path: str = "/x") -> list[Message]:
        sent: list[Message] = []

        async def receive() -> Message:
            return {"type": "http.request", "body": b""}

        async def send(message: Message) -> None:
            sent.append(message)

        await middleware({"type": "http", "path": path, "method": "GET", "headers": []}, receive, send)
        return sent

    async def until_inside(n: int) -> None:
        async with arrived:
            await asyncio.wait_for(arrived.wait_for(lambda: len(inside) == n), 60)

    async def main() -> tuple[list[list[Message]], list[Message]]:
        running = [asyncio.create_task(call()) for _ in range(2)]
        await until_inside(2)  # both places taken, held until the release
        refused = await call()
        # Probes are never refused, nor queued: this one gets in while both places are held.
        health = asyncio.create_task(call("/healthz"))
        await until_inside(3)
        release.set()
        return [*(await asyncio.gather(*running)), await health], refused

    served, refused = run_async(main)
    assert [m[0]["status"] for m in served] == [200, 200, 200]
    assert refused[0]["status"] == 503
    assert (b"retry-after", b"1") in refused[0]["headers"]
    assert inside == ["/x", "/x", "/healthz"]  # the refused call never reached the app


def test_a_page_that_only_reads_does_not_wait_for_the_sqlite_writer(
    app_client: TestClient, loaded: None, database_url: str,
) -> None:
    if not database_url.startswith("sqlite"):
        pytest.skip("SQLite's write lock")
    writer = sqlite3.connect(database_url.removeprefix("sqlite:///"), isolation_level=None, timeout=0)
    writer.execute("BEGIN IMMEDIATE")
    try:
        # With a read taking the write lock this would wait out the busy timeout (15 s).
        for path in ("/", "/topics/basics", "/questions/fixture-single", "/api/v1/questions",
                     "/healthz"):
            assert app_client.get(path).status_code == 200, path
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_40_concurrent_wrong_passwords_get_no_more_tries_than_the_limit(
    server: Callable[..., Server], session_factory: sessionmaker[Session],
) -> None:
    with session_scope(session_factory) as s:
        accounts.create_user(db_session=s, username="teacher", password="right password 123",
                             role="author")
    srv = server(login_attempts_per_minute="10")

    async def guess(client: Client) -> int:
        page = await client.get("/login")
        reply = await client.post_form("/login", [("csrf_token", csrf_of(page.text)),
                                                  ("username", "teacher"), ("password", WRONG)])
        return reply.status

    async def main() -> list[int]:
        clients = [Client(srv.url) for _ in range(40)]
        try:
            return list(await asyncio.gather(*(guess(c) for c in clients)))
        finally:
            await asyncio.gather(*(c.close() for c in clients))

    statuses = run_async(main)
    # 503 (busy, retry) is an acceptable answer on a starved machine; a 500 or a 401
    # beyond the limit is not.
    assert set(statuses) <= {401, 429, 503}
    assert 429 in statuses
    checked = statuses.count(401)  # each 401 is a password that was actually checked
    assert 1 <= checked <= 10
    with session_factory() as s:
        assert s.scalar(select(func.count()).select_from(RateHit)
                        .where(RateHit.bucket == "login")) == checked


def test_metrics_report_requests_by_route_and_the_queue(app_client: TestClient, loaded: None) -> None:
    assert app_client.get("/questions/fixture-single").status_code == 200
    operator = TestClient(app_client.app, client=("127.0.0.1", 50000))
    body = operator.get("/metrics").text
    assert 'route="/questions/{slug}"' in body
    assert "ddpdrill_request_duration_seconds_bucket" in body
    for name in ("ddpdrill_queue_depth", "ddpdrill_runs", "ddpdrill_run_duration_seconds",
                 "ddpdrill_workers_busy", "ddpdrill_workers_in_process", "ddpdrill_lease_reclaims"):
        assert f"# TYPE {name}" in body, name
    assert parse(app_client.get("/")).find("body") is not None


def test_x_forwarded_for_is_believed_only_from_a_configured_proxy(server: Any) -> None:
    """`ddpdrill serve` as users run it: a local client's X-Forwarded-For is not believed (it
    would step around every per-address limit), unless DDPDRILL_FORWARDED_ALLOW_IPS names the
    proxy. Seen through /metrics, which answers only loopback clients."""
    import urllib.error
    import urllib.request

    def metrics_status(url: str, claimed: str) -> int:
        req = urllib.request.Request(f"{url}/metrics", headers={"X-Forwarded-For": claimed})
        try:
            with urllib.request.urlopen(req, timeout=30) as response:
                return int(response.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)

    plain = server()
    assert metrics_status(plain.url, "203.0.113.5") == 200  # the peer, 127.0.0.1, counts
    plain.stop()
    proxied = server(forwarded_allow_ips="127.0.0.1")
    assert metrics_status(proxied.url, "203.0.113.5") == 403  # the proxy's word is believed
    assert metrics_status(proxied.url, "127.0.0.1") == 200
