"""Live servers for tests that talk HTTP to the app.

`serve` runs the app in a thread of the test process on a free port (the browser tests,
and tests that need a real socket); `Server` is a real `ddpdrill serve` subprocess on the
test database, for load and crash tests (the `server` fixture in tests/conftest.py starts
them): it runs as users run it, so a test can SIGKILL it and start it again.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import uvicorn

from app.main import create_app
from app.migrate import upgrade
from app.settings import Settings
from tests.factories import import_folder

REPO = Path(__file__).resolve().parents[1]
# A server imports torch-free app code and starts in about a second on an idle machine;
# this bounds a broken start, on a machine shared by several test runs.
SERVER_START_TIMEOUT_S = 120
# A server in a thread starts in well under a second.
# How long a browser test waits on a page of a live server: four xdist workers, gloo ranks
# and Chromium share two cores in CI, and a page that takes 10 s there once failed a run.
PAGE_TIMEOUT_MS = 20_000
THREAD_START_TIMEOUT_S = 60
# How often a `serve` subprocess is started on another port when its own was taken.
PORT_TRIES = 5


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve(settings: Settings) -> Iterator[str]:
    """Runs the app with these settings in a thread; yields its base URL. The socket is
    bound here and handed to uvicorn, so no other test (another xdist worker's) can take
    the port in between."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = int(listener.getsockname()[1])
    settings = settings.model_copy(update={"host": "127.0.0.1", "port": port})
    server = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1", port=port,
                                           log_level="warning", ws="none", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, name="live-server",
                              daemon=True)
    thread.start()
    deadline = time.monotonic() + THREAD_START_TIMEOUT_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            pytest.fail("the live server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        listener.close()


def database_with(folder: Path, bank: Path) -> str:
    """A migrated SQLite file in folder with the bank imported; returns its URL."""
    from app.db import make_engine, make_sessionmaker

    url = f"sqlite:///{folder / 'live.db'}"
    upgrade(url)
    engine = make_engine(url)
    import_folder(make_sessionmaker(engine), bank)
    engine.dispose()
    return url


def settings_for(folder: Path, bank: Path, *, workers: int) -> Settings:
    """Settings for a live server on its own SQLite file in folder, with the bank imported."""
    return Settings(database_url=database_with(folder, bank), secret_key="browser-" + uuid.uuid4().hex,
                    data_dir=folder / "data", bank_dir=bank, workers=workers)


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
               "DDPDRILL_WORKERS": "0", "DDPDRILL_LOAD_BANK_ON_START": "false",
               # A busy test machine must not turn into 503s: these tests are about what the
               # server stores, not about admission (tests of admission set their own wait).
               "DDPDRILL_ADMISSION_WAIT_S": "120", **self.env}
        for _ in range(PORT_TRIES):
            log_path = self.folder / f"server-{self.port}-{time.monotonic_ns()}.log"
            with open(log_path, "wb") as log:
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "app.cli", "serve", "--port", str(self.port)],
                    cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            deadline = time.monotonic() + SERVER_START_TIMEOUT_S
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                try:
                    with urllib.request.urlopen(self.url + "/healthz", timeout=1) as r:
                        if r.status == 200:
                            return self
                except OSError:
                    time.sleep(0.05)
            else:
                raise AssertionError("the server did not start")
            if b"address already in use" not in log_path.read_bytes().lower():
                raise AssertionError(f"the server exited with {self.proc.returncode}")
            # Another test (another xdist worker's) took the port between our look and the
            # server's bind: another port.
            self.port = _free_port()
        raise AssertionError(f"no free port in {PORT_TRIES} tries")

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
