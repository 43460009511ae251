"""Fixtures for verify: one warm engine for the whole session (its forkserver starts once,
in a few seconds), snippets run on it, and `ddpdrill worker` processes on the test database."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.settings import Settings
from app.verify.engine import Engine, Limits, RunResult
from tests.verify.helpers import Run

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def worker_process(database_url: str, tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Starts `ddpdrill worker` processes on the test database; all are stopped afterwards."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(lease_seconds: float = 30.0, concurrency: int = 1,
              sandbox: bool = True) -> subprocess.Popen[bytes]:
        env = {**os.environ, "DDPDRILL_DATABASE_URL": database_url,
               "DDPDRILL_DATA_DIR": str(tmp_path / "data"),
               "DDPDRILL_LEASE_SECONDS": str(lease_seconds),
               "DDPDRILL_SANDBOX": "on" if sandbox else "off"}
        with open(tmp_path / f"worker-{len(procs)}.log", "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "app.cli", "worker", "--concurrency", str(concurrency)],
                cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


@pytest.fixture
def fast_settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"lease_seconds": 2.0})


@pytest.fixture(scope="session")
def engine() -> Iterator[Engine]:
    eng = Engine()
    eng.start()
    yield eng
    eng.close()


@pytest.fixture
def run(engine: Engine) -> Run:
    """run(code, world_size=2, params=None, timeout_s=5, **limits): dedents the snippet."""

    def _run(code: str, *, world_size: int = 2, params: dict[str, Any] | None = None,
             timeout_s: float = 5.0, trace_buckets: bool = True, **limits: Any) -> RunResult:
        return engine.run(textwrap.dedent(code), world_size=world_size, params=params,
                          limits=Limits(timeout_s=timeout_s, **limits),
                          trace_buckets=trace_buckets)

    return _run

