"""Fixtures for the verify service: real databases, real workers, the real engine."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from app.db import session_scope
from app.settings import Settings
from app.verify import service
from app.verify.engine import HARNESS_VERSION, torch_version
from app.verify.models import Run

REPO = Path(__file__).resolve().parents[2]


def make_request(snippet: str, *, params: dict | None = None, world_size: int = 1,
                 timeout_s: float = 10.0, requested_by: str | None = None) -> service.RunRequest:
    return service.RunRequest(snippet_text=snippet, world_size=world_size, params=params or {},
                              timeout_s=timeout_s, torch_version=torch_version(),
                              harness_version=HARNESS_VERSION, requested_by=requested_by)


def enqueue(factory: sessionmaker[Session], req: service.RunRequest) -> int:
    with session_scope(factory) as s:
        run, _ = service.request_run(db_session=s, req=req)
        return run.id


def wait_for(predicate: Callable[[], bool], timeout: float = 30.0, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError("condition not reached in time")


def run_status(factory: sessionmaker[Session], run_id: int) -> str:
    with session_scope(factory) as s:
        run = s.get(Run, run_id)
        assert run is not None
        return run.status


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
