"""Fast recovery: short leases reclaimed at once, idle workers woken rather than polling."""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from app.db import session_scope
from app.settings import Settings
from app.verify.models import RUN_DONE, Run
from app.verify.worker import Worker, WorkerPool
from tests.factories import enqueue, make_request, run_status, wait_for

# Its first execution marks that it started and then runs until its worker is killed; the
# execution after that finds the mark and reports at once.
UNTIL_KILLED_SNIPPET = """
import os, time
mark = os.path.join(params["dir"], "started")
if os.path.exists(mark):
    report("resumed", True)
else:
    open(mark, "w").close()
    time.sleep(120)
"""


def _owner_pid(factory: sessionmaker[Session], run_id: int) -> int:
    with session_scope(factory) as s:
        run = s.get(Run, run_id)
        assert run is not None and run.lease_owner is not None
        return int(run.lease_owner.split(":")[1])


def test_a_killed_workers_run_is_taken_over_and_completes(
    session_factory: sessionmaker[Session], worker_process, tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    lease = Settings().lease_seconds  # the default: what operators get
    # The marker file is the side effect the sandbox exists to stop: these workers run without it.
    workers = [worker_process(lease_seconds=lease, sandbox=False),
               worker_process(lease_seconds=lease, sandbox=False)]
    # Both workers have their rank pools warm once each has run something.
    warm = [enqueue(session_factory, make_request(f"report('warm', {i})")) for i in range(4)]
    wait_for(lambda: all(run_status(session_factory, i) == RUN_DONE for i in warm), timeout=120)
    run_id = enqueue(session_factory, make_request(
        UNTIL_KILLED_SNIPPET, params={"dir": str(tmp_path)}, timeout_s=60))
    wait_for(lambda: (tmp_path / "started").exists(), timeout=60)  # the run is executing
    doomed = next(w for w in workers if w.pid == _owner_pid(session_factory, run_id))
    os.killpg(doomed.pid, signal.SIGKILL)
    doomed.wait(timeout=10)
    # Only that the other worker takes the run over once the lease runs out and finishes it;
    # how soon is a matter of the lease (DDPDRILL_LEASE_SECONDS), not for a test to time.
    wait_for(lambda: run_status(session_factory, run_id) == RUN_DONE, timeout=120)
    with session_scope(session_factory) as s:
        run = s.get(Run, run_id)
        assert run is not None and run.attempts == 2
        assert run.result is not None and run.result["ranks"][0]["values"]["resumed"] is True


def _polls_while_the_write_lock_is_held(worker: Worker, database_url: str) -> list[bool]:
    """What the worker's next poll returns while another connection holds SQLite's write
    lock; a poll that took the lock would wait out the 15 s busy timeout and fail (returning
    nothing), since the lock is held until the poll has ended."""
    writer = sqlite3.connect(database_url.removeprefix("sqlite:///"), isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        result: list[bool] = []
        look = threading.Thread(target=lambda: result.append(worker.run_once()))
        look.start()
        look.join(timeout=120)
        return result
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_an_idle_worker_looks_for_work_without_taking_the_sqlite_write_lock(
    session_factory: sessionmaker[Session], settings: Settings, database_url: str,
) -> None:
    if not database_url.startswith("sqlite"):
        pytest.skip("SQLite's write lock")
    worker = Worker(session_factory, settings)
    assert _polls_while_the_write_lock_is_held(worker, database_url) == [False]


def test_a_worker_that_found_the_queue_empty_looks_again_with_a_read(
    session_factory: sessionmaker[Session], settings: Settings, database_url: str,
) -> None:
    """While the queue has work a claim skips the read; once a claim comes back empty the
    next poll is a read again, so an idle worker does not wait on the write lock."""
    if not database_url.startswith("sqlite"):
        pytest.skip("SQLite's write lock")
    worker = Worker(session_factory, settings)
    run_id = enqueue(session_factory, make_request("report('x', 1)"))
    assert worker.run_once() is True and run_status(session_factory, run_id) == RUN_DONE
    assert worker.run_once() is False  # the write claim that finds the queue empty
    assert _polls_while_the_write_lock_is_held(worker, database_url) == [False]


def test_a_claim_that_fails_leaves_the_next_poll_a_read(
    session_factory: sessionmaker[Session], settings: Settings, database_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if not database_url.startswith("sqlite"):
        pytest.skip("SQLite's write lock")
    worker = Worker(session_factory, settings)
    enqueue(session_factory, make_request("report('x', 1)"))
    assert worker.run_once() is True  # it found a run: its next claim would skip the read

    def locked(**_: object) -> None:
        raise RuntimeError("database is locked")

    monkeypatch.setattr("app.verify.queue.claim_run", locked)
    with pytest.raises(RuntimeError):
        worker.claim()
    monkeypatch.undo()
    assert _polls_while_the_write_lock_is_held(worker, database_url) == [False]


def test_queueing_a_run_wakes_idle_workers_on_postgresql(
    session_factory: sessionmaker[Session], settings: Settings, database_url: str,
) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("LISTEN/NOTIFY is PostgreSQL's")
    pool = WorkerPool(session_factory, settings, 0)
    pool.start()
    try:
        assert pool.wakeup.wait(10), "the listener did not connect"  # it looks once on connecting
        pool.wakeup.clear()
        assert not pool.wakeup.wait(0.5)
        enqueue(session_factory, make_request("report('x', 1)"))  # from another session and connection
        assert pool.wakeup.wait(10), "no notification arrived"
    finally:
        pool.shutdown(timeout=5)
