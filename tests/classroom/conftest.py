"""A real `ddpdrill serve` process on the test database, for load and crash tests.

The server runs as users run it (a subprocess of `python -m app.cli serve`), so a
test can SIGKILL it and start it again on the same database.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# A server imports torch-free app code and starts in about a second; this bounds a broken start.
SERVER_START_TIMEOUT_S = 30


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """One `ddpdrill serve` subprocess."""

    def __init__(self, database_url: str, folder: Path, env: dict[str, str]) -> None:
        self.database_url = database_url
        self.folder = folder
        self.env = env
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Server:
        env = {**os.environ, "DDPDRILL_DATABASE_URL": self.database_url,
               "DDPDRILL_DATA_DIR": str(self.folder / "data"),
               "DDPDRILL_SECRET_KEY": "classroom-test-secret-key-0123456789abcdef",
               "DDPDRILL_WORKERS": "0", "DDPDRILL_LOAD_BANK_ON_START": "false", **self.env}
        log = open(self.folder / f"server-{self.port}-{time.monotonic_ns()}.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--port", str(self.port)],
            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"the server exited with {self.proc.returncode}")
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=1) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.05)
        raise AssertionError("the server did not start")

    def kill(self) -> None:
        """SIGKILL: no shutdown hook runs, as when the machine loses power."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture
def server(database_url: str, loaded: None, tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """Starts `ddpdrill serve` processes on the test database (fixture bank loaded)."""
    started: list[Server] = []

    def start(**env: str) -> Server:
        s = Server(database_url, tmp_path, {f"DDPDRILL_{k.upper()}": v for k, v in env.items()}).start()
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()
