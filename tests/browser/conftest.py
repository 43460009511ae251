"""A live server and a real Chromium for the browser tests.

The server is uvicorn in a thread of the test process, on a free 127.0.0.1 port,
against a temporary SQLite file holding the fixture bank. Chromium is Debian's
(/usr/bin/chromium) driven by Playwright; without it the tests skip, except under
CI=true, where a missing browser is a failure.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import uvicorn

from app.main import create_app
from app.migrate import upgrade
from app.settings import Settings
from tests.conftest import REAL_BANK
from tests.factories import FIXTURE_BANK, import_folder

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# The server starts in well under a second; this only bounds a broken start.
SERVER_START_TIMEOUT_S = 15


def _chromium() -> str | None:
    for candidate in ("/usr/bin/chromium", shutil.which("chromium")):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve(settings: Settings) -> Iterator[str]:
    """Runs the app with these settings in a thread; yields its base URL."""
    port = _free_port()
    settings = settings.model_copy(update={"host": "127.0.0.1", "port": port})
    server = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1", port=port,
                                           log_level="warning", ws="none", lifespan="on"))
    thread = threading.Thread(target=server.run, name="live-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            pytest.fail("the live server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


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


@pytest.fixture(scope="session")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The app at http://127.0.0.1:<port>, on its own SQLite file with the fixture bank."""
    with serve(settings_for(tmp_path_factory.mktemp("live"), FIXTURE_BANK, workers=0)) as url:
        yield url


@pytest.fixture(scope="session")
def verify_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The app with the real question bank and one in-process verify worker (real gloo runs)."""
    with serve(settings_for(tmp_path_factory.mktemp("live-verify"), REAL_BANK, workers=1)) as url:
        yield url


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    """A headless Chromium, or a skip (a failure under CI=true) when there is none."""
    executable = _chromium()
    if executable is None:
        message = "chromium is not installed (apt-get install chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()
