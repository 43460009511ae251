"""Fixtures for the verify service: real databases, real workers, the real engine."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.settings import Settings

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
