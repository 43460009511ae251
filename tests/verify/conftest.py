"""One warm engine for the whole session: its forkserver starts once (a few seconds)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from app.verify.engine import Engine, Limits, RunResult


@pytest.fixture(scope="session")
def engine() -> Iterator[Engine]:
    eng = Engine()
    eng.start()
    yield eng
    eng.close()


Run = Callable[..., RunResult]


@pytest.fixture
def run(engine: Engine) -> Run:
    """run(code, world_size=2, params=None, timeout_s=5, **limits): dedents the snippet."""

    def _run(code: str, *, world_size: int = 2, params: dict[str, Any] | None = None,
             timeout_s: float = 5.0, trace_buckets: bool = True, **limits: Any) -> RunResult:
        return engine.run(textwrap.dedent(code), world_size=world_size, params=params,
                          limits=Limits(timeout_s=timeout_s, **limits),
                          trace_buckets=trace_buckets)

    return _run


def events(result: RunResult, rank: int, kind: str) -> list[dict[str, Any]]:
    return [e for e in result.ranks[rank].events if e["kind"] == kind]
