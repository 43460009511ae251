"""Request bodies are read before a view runs; responses carry security headers."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from urllib.request import urlopen

import pytest
from fastapi.testclient import TestClient

from app.middleware import CSP, MAX_BODY_BYTES
from tests.factories import FIXTURE_BANK
from tests.servers import serve, settings_for


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serve(settings_for(tmp_path_factory.mktemp("mw"), FIXTURE_BANK, workers=0)) as url:
        yield url


def test_a_client_trickling_its_body_does_not_block_other_requests(server: str) -> None:
    host, port = server.removeprefix("http://").split(":")
    page = urlopen(f"{server}/questions/fixture-single", timeout=10)
    cookie = page.headers["set-cookie"].split(";")[0]
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.read().decode())
    assert token is not None
    body = b"answer=b&padding=" + b"x" * 200
    slow = socket.create_connection((host, int(port)))
    try:
        # Headers that pass the CSRF check without reading the body, then 5 bytes of it.
        slow.sendall(
            f"POST /questions/fixture-single/answer HTTP/1.1\r\nHost: x\r\nCookie: {cookie}\r\n"
            f"X-CSRF-Token: {token.group(1)}\r\nHX-Request: true\r\n"
            f"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {len(body)}\r\n\r\n"
            .encode() + body[:5])
        # With the view holding SQLite's write lock while it waited for the body, these
        # would fail after the 15 s busy timeout; they must simply work.
        for path in ("/", "/healthz", "/questions/fixture-multi"):
            with urlopen(f"{server}{path}", timeout=8) as r:
                assert r.status == 200
        slow.sendall(body[5:])
        assert slow.recv(100).startswith(b"HTTP/1.1 200")
    finally:
        slow.close()


def test_oversized_body_is_refused_with_413(server: str) -> None:
    host, port = server.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(f"POST /quizzes HTTP/1.1\r\nHost: x\r\nContent-Length: {MAX_BODY_BYTES + 1}\r\n"
                     "Content-Type: application/x-www-form-urlencoded\r\n\r\n".encode())
        assert sock.recv(100).startswith(b"HTTP/1.1 413")


def test_pages_carry_a_content_security_policy(client: TestClient) -> None:
    r = client.get("/questions/fixture-single")
    assert r.headers["content-security-policy"] == CSP
    assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP.split("script-src")[1].split(";")[0]
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["x-frame-options"] == "DENY"
