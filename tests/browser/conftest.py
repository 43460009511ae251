"""A live server and a real Chromium for the browser tests.

The server is uvicorn in a thread of the test process (tests/servers.py), on a free
127.0.0.1 port, against a temporary SQLite file holding the fixture bank. Chromium is Debian's
(/usr/bin/chromium) driven by Playwright; without it the tests skip, except under
CI=true, where a missing browser is a failure.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.factories import FIXTURE_BANK, REAL_BANK
from tests.servers import serve, settings_for

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _chromium() -> str | None:
    for candidate in ("/usr/bin/chromium", shutil.which("chromium")):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


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
