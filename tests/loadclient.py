"""A small asyncio HTTP/1.1 client for load tests and benchmarks/load.py.

Each `Client` is one learner: its own keep-alive connection and its own cookies, as a
browser tab would have. It speaks only what the app needs (GET, form and JSON POSTs,
Content-Length bodies), so 64 of them cost little CPU next to the server under test.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit

from bs4 import BeautifulSoup


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes
    seconds: float

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.body)


class _ClosedBeforeReply(ConnectionError):
    """The server closed the connection without a byte of reply."""


class Client:
    """One visitor: a keep-alive connection and a cookie jar."""

    def __init__(self, base_url: str, timeout_s: float = 60.0, source: str | None = None) -> None:
        """`source`: the local address to connect from (any of 127.0.0.0/8 reaches a server on
        127.0.0.1), so that visitors can come from addresses of their own."""
        parts = urlsplit(base_url)
        self.source = source
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.timeout_s = timeout_s
        self.cookies: dict[str, str] = {}
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    @property
    def connected(self) -> bool:
        """Whether a connection is open (a request on a new connection is written in the
        same step as it opens)."""
        return self._writer is not None and not self._writer.is_closing()

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(OSError):
                await self._writer.wait_closed()
            self._writer = self._reader = None

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._reader is not None and self._reader.at_eof():
            await self.close()  # the server closed the idle connection (its keep-alive timeout)
        if self._reader is None or self._writer is None or self._writer.is_closing():
            self._reader, self._writer = await asyncio.open_connection(
                self.host, self.port, local_addr=(self.source, 0) if self.source else None)
        return self._reader, self._writer

    async def request(self, method: str, path: str, *, body: bytes = b"",
                      headers: dict[str, str] | None = None) -> Reply:
        start = time.perf_counter()
        # A kept-alive connection the server closed while it was idle, just as the request went
        # out, is answered by nothing at all; a browser then resends on a new connection, once.
        reused = self._writer is not None and not self._writer.is_closing()
        try:
            try:
                reply = await asyncio.wait_for(self._exchange(method, path, body, headers or {}),
                                               self.timeout_s)
            except (ConnectionResetError, _ClosedBeforeReply):
                if not reused:
                    raise
                await self.close()
                reply = await asyncio.wait_for(self._exchange(method, path, body, headers or {}),
                                               self.timeout_s)
        except BaseException:
            await self.close()
            raise
        reply.seconds = time.perf_counter() - start
        return reply

    async def _exchange(self, method: str, path: str, body: bytes, headers: dict[str, str]) -> Reply:
        reader, writer = await self._connect()
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.host}:{self.port}",
                 f"Content-Length: {len(body)}"]
        if self.cookies:
            lines.append("Cookie: " + "; ".join(f"{k}={v}" for k, v in self.cookies.items()))
        lines += [f"{k}: {v}" for k, v in headers.items()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        await writer.drain()
        status_line = await reader.readline()
        if not status_line:
            raise _ClosedBeforeReply("the server closed the connection")
        status = int(status_line.split()[1])
        got: dict[str, str] = {}
        close = False
        while True:
            line = (await reader.readline()).decode("latin-1").rstrip("\r\n")
            if not line:
                break
            name, _, value = line.partition(":")
            name, value = name.strip().lower(), value.strip()
            if name == "set-cookie":
                cookie = value.split(";", 1)[0]
                k, _, v = cookie.partition("=")
                self.cookies[k.strip()] = v.strip()
            elif name == "connection" and value.lower() == "close":
                close = True
            got[name] = value
        if "content-length" in got:
            data = await reader.readexactly(int(got["content-length"]))
        elif got.get("transfer-encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int((await reader.readline()).strip(), 16)
                if size == 0:
                    await reader.readline()
                    break
                data += await reader.readexactly(size)
                await reader.readline()
        else:
            data = await reader.read()
            close = True
        if close:
            await self.close()
        return Reply(status, got, data, 0.0)

    async def get(self, path: str, **kw: Any) -> Reply:
        return await self.request("GET", path, **kw)

    async def post_form(self, path: str, fields: list[tuple[str, str]],
                        headers: dict[str, str] | None = None) -> Reply:
        return await self.request("POST", path, body=urlencode(fields).encode(), headers={
            "Content-Type": "application/x-www-form-urlencoded", **(headers or {})})

    async def post_json(self, path: str, data: Any, headers: dict[str, str] | None = None) -> Reply:
        return await self.request("POST", path, body=json.dumps(data).encode(), headers={
            "Content-Type": "application/json", **(headers or {})})


def csrf_of(html: str) -> str:
    """The page's CSRF token (base.html puts it in hx-headers on <body>)."""
    soup = BeautifulSoup(html, "lxml")
    body = soup.find("body")
    assert body is not None, "not a full page"
    return str(json.loads(str(body["hx-headers"]))["X-CSRF-Token"])


def answer_fields(html: str) -> list[tuple[str, str]]:
    """A valid-looking answer to the question form on the page: the first choice or a number."""
    soup = BeautifulSoup(html, "lxml")
    form = soup.select_one("form[action$='/answer']")
    assert form is not None, "the page has no answer form"
    fields: list[tuple[str, str]] = []
    for hidden in form.select("input[type=hidden]"):
        fields.append((str(hidden["name"]), str(hidden.get("value", ""))))
    choice = form.select_one("input[name=answer][type=radio], input[name=answer][type=checkbox]")
    if choice is not None:
        fields.append(("answer", str(choice["value"])))
    else:
        fields.append(("answer", "1"))
    return fields


@dataclass
class Timings:
    """Latencies of one kind of request, and how many failed."""

    seconds: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @classmethod
    def pooled(cls, parts: list[Timings]) -> Timings:
        """One Timings holding every request of `parts` (rounds of the same workload)."""
        return cls([s for t in parts for s in t.seconds], [e for t in parts for e in t.errors])

    def percentile(self, p: float) -> float:
        if not self.seconds:
            return float("nan")
        ordered = sorted(self.seconds)
        return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]
