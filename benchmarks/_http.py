"""What the HTTP benchmarks share: a free local port, a `ddpdrill serve` to measure, one
browser's keep-alive JSON client, percentiles, and a scratch PostgreSQL schema."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

REPO = Path(__file__).resolve().parent.parent


@contextmanager
def scratch_schema(postgresql_url: str) -> Iterator[str]:
    """A URL for a new, empty schema in that PostgreSQL database, dropped on leaving."""
    from sqlalchemy import create_engine, text

    schema = f"bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(postgresql_url)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    sep = "&" if "?" in postgresql_url else "?"
    try:
        yield f"{postgresql_url}{sep}options={quote(f'-csearch_path={schema}')}"
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def on_both_databases(run: Callable[[str, str], bool], description: str) -> int:
    """The command line of a benchmark that measures on a fresh SQLite file and, with
    --postgresql URL, in a scratch schema there too: `run(url, label)` says whether its
    targets were met; the exit status is 0 when every one was."""
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--postgresql", help="a PostgreSQL URL to measure on as well")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ddpdrill-bench-db-"))
    ok = run(f"sqlite:///{tmp / 'bench.db'}", "sqlite")
    if args.postgresql:
        with scratch_schema(args.postgresql) as url:
            ok &= run(url, "postgresql")
    return 0 if ok else 1


def free_port() -> int:
    """A port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def percentile(values: list[float], p: float) -> float:
    """The nearest-rank p-th percentile (p in 0..100)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


@contextmanager
def running_server(env: dict[str, str | None], timeout: float = 120) -> Iterator[int]:
    """`ddpdrill serve` on a free port, with `env` over this process's environment (None
    removes a variable), once /healthz answers 200; its port. Stopped on leaving."""
    port = free_port()
    full = {**os.environ, **{k: v for k, v in env.items() if v is not None}}
    for name in (k for k, v in env.items() if v is None):
        full.pop(name, None)
    server = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
                              cwd=REPO, env=full, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"the server exited with {server.returncode}")
            try:
                if JsonClient(port).request_raw("GET", "/healthz")[0] == 200:
                    break
            except (OSError, http.client.HTTPException):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("the server did not start")
            time.sleep(0.1)
        yield port
    finally:
        server.terminate()
        server.wait(timeout=60)


class JsonClient:
    """One browser's worth of HTTP: a keep-alive connection and its learner cookie (the first
    one the server sets, unless one is given)."""

    def __init__(self, port: int, cookie: str = "", timeout: float = 60) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        self.cookie = cookie

    def request_raw(self, method: str, path: str, body: dict | None = None) -> tuple[int, bytes]:
        headers = {"Content-Type": "application/json"}
        if self.cookie:
            headers["Cookie"] = self.cookie
        self.conn.request(method, path, body=json.dumps(body) if body is not None else None,
                          headers=headers)
        resp = self.conn.getresponse()
        data = resp.read()
        cookie = resp.getheader("set-cookie")
        if cookie and not self.cookie:
            self.cookie = cookie.split(";")[0]
        return resp.status, data

    def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        status, data = self.request_raw(method, path, body)
        return status, json.loads(data) if data else {}
