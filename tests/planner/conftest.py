"""One warm verify engine for the planner's real gloo runs (its forkserver starts once)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.verify.engine import Engine


@pytest.fixture(scope="session")
def engine() -> Iterator[Engine]:
    eng = Engine()
    eng.start()
    yield eng
    eng.close()
