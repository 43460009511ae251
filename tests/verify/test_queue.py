"""The run queue on real databases with real workers and real gloo runs."""

from __future__ import annotations

import json
import os
import signal
import threading
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.db import session_scope
from app.settings import Settings
from app.verify import queue, results, service
from app.verify.models import RUN_DONE, RUN_FAILED, RUN_QUEUED, Run
from app.verify.worker import Worker
from tests.factories import enqueue, make_request, run_status, wait_for

COUNTING_SNIPPET = """
import os
# One marker file per execution: the test counts them to prove each run executed once.
open(os.path.join(params["dir"], f"{params['i']}-{os.getpid()}"), "w").close()
report("i", params["i"])
"""

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
# Marks that it started, then finishes only once the test says so.
UNTIL_TOLD_SNIPPET = """
import os, time
open(os.path.join(params["dir"], "started"), "w").close()
while not os.path.exists(os.path.join(params["dir"], "finish")):
    time.sleep(0.01)
report("finished", True)
"""


def test_same_key_twice_gives_one_run(session_factory: sessionmaker[Session]) -> None:
    req = make_request("report('x', 1)")
    first = enqueue(session_factory, req)
    with session_scope(session_factory) as s:
        run, cached = service.request_run(db_session=s, req=req)
    assert run.id == first and cached


def test_concurrent_requests_for_one_key_share_one_run(session_factory: sessionmaker[Session]) -> None:
    req = make_request("report('x', 2)")
    ids: list[int] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(6)

    def ask() -> None:
        try:
            barrier.wait()
            ids.append(enqueue(session_factory, req))
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=ask) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(set(ids)) == 1
    with session_scope(session_factory) as s:
        assert len(s.scalars(select(Run).where(Run.cache_key == req.key)).all()) == 1


def test_worker_executes_and_stores_a_validated_result(
    session_factory: sessionmaker[Session], settings: Settings
) -> None:
    run_id = enqueue(session_factory, make_request("report('answer', 42)"))
    assert Worker(session_factory, settings).run_once()
    with session_scope(session_factory) as s:
        run = s.get(Run, run_id)
        assert run is not None and run.status == RUN_DONE
        assert run.result is not None and run.result["outcome"] == "ok"
        assert run.result["ranks"][0]["values"]["answer"] == 42
        assert run.attempts == 1
        assert run.claimed_at and run.started_at and run.finished_at
        assert run.requested_at <= run.claimed_at <= run.started_at <= run.finished_at


def test_done_run_is_served_from_cache_and_fresh_executes_again(
    session_factory: sessionmaker[Session], settings: Settings
) -> None:
    req = make_request("report('v', 1)")
    run_id = enqueue(session_factory, req)
    Worker(session_factory, settings).run_once()
    with session_scope(session_factory) as s:
        again, cached = service.request_run(db_session=s, req=req)
        assert (again.id, again.status, cached) == (run_id, RUN_DONE, True)
        fresh, cached = service.request_run(db_session=s, req=req, fresh=True)
        assert fresh.id != run_id and not cached and fresh.status == RUN_QUEUED
        old = s.get(Run, run_id)
        assert old is not None and old.live is None and old.result is not None


def test_two_worker_processes_execute_twenty_runs_exactly_once(
    session_factory: sessionmaker[Session], worker_process, tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    ids = [enqueue(session_factory, make_request(COUNTING_SNIPPET, params={"dir": str(marks), "i": i}))
           for i in range(20)]
    # The marker files are exactly the side effect the sandbox exists to stop: these
    # workers run without it, since what is tested here is the queue.
    a, b = worker_process(sandbox=False), worker_process(sandbox=False)
    wait_for(lambda: all(run_status(session_factory, i) == RUN_DONE for i in ids), timeout=90)
    executions = Counter(name.split("-")[0] for name in os.listdir(marks))
    assert executions == Counter({str(i): 1 for i in range(20)})
    with session_scope(session_factory) as s:
        runs = s.scalars(select(Run).where(Run.id.in_(ids))).all()
        assert all(r.attempts == 1 for r in runs)
        reported = [r.result["ranks"][0]["values"]["i"] for r in sorted(runs, key=lambda r: r.id)]
        assert reported == list(range(20))
    assert a.poll() is None and b.poll() is None


def test_run_of_a_killed_worker_is_claimed_again_and_completes(
    session_factory: sessionmaker[Session], worker_process, tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:
    # The marker file is the side effect the sandbox exists to stop: these workers run without it.
    run_id = enqueue(session_factory, make_request(
        UNTIL_KILLED_SNIPPET, params={"dir": str(tmp_path)}, timeout_s=60))
    doomed = worker_process(lease_seconds=1.5, sandbox=False)
    wait_for(lambda: (tmp_path / "started").exists(), timeout=60)  # the run is executing
    os.killpg(doomed.pid, signal.SIGKILL)
    doomed.wait(timeout=10)
    worker_process(lease_seconds=1.5, sandbox=False)
    wait_for(lambda: run_status(session_factory, run_id) == RUN_DONE, timeout=60)
    with session_scope(session_factory) as s:
        run = s.get(Run, run_id)
        assert run is not None and run.attempts == 2
        assert run.result is not None and run.result["ranks"][0]["values"]["resumed"] is True


def test_sigterm_lets_the_worker_finish_its_run(
    session_factory: sessionmaker[Session], worker_process, tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:
    run_id = enqueue(session_factory, make_request(
        UNTIL_TOLD_SNIPPET, params={"dir": str(tmp_path)}, timeout_s=60))
    proc = worker_process(sandbox=False)
    wait_for(lambda: (tmp_path / "started").exists(), timeout=60)  # the run is executing
    proc.send_signal(signal.SIGTERM)
    (tmp_path / "finish").touch()  # only now may the run end
    assert proc.wait(timeout=60) == 0
    assert run_status(session_factory, run_id) == RUN_DONE
    with session_scope(session_factory) as s:
        run = s.get(Run, run_id)
        assert run is not None and run.result is not None
        assert run.result["ranks"][0]["values"]["finished"] is True


def test_infrastructure_failure_is_retried_then_marked_failed(
    session_factory: sessionmaker[Session],
) -> None:
    run_id = enqueue(session_factory, make_request("report('x', 3)"))
    statuses = []
    for n in range(queue.MAX_ATTEMPTS):
        with session_scope(session_factory) as s:
            run = queue.claim_run(db_session=s, worker_id=f"w{n}", lease_seconds=30)
            assert run is not None and run.id == run_id
            statuses.append(queue.fail_attempt(db_session=s, run_id=run_id, worker_id=f"w{n}",
                                                 reason="forkserver died"))
    assert statuses == [RUN_QUEUED, RUN_QUEUED, RUN_FAILED]
    with session_scope(session_factory) as s:
        assert queue.claim_run(db_session=s, worker_id="w9", lease_seconds=30) is None
        # A failed run is not an answer: asking again queues a new one.
        again, cached = service.request_run(db_session=s, req=make_request("report('x', 3)"))
        assert again.id != run_id and not cached


def test_expired_lease_is_reclaimed_and_the_old_worker_cannot_complete(
    session_factory: sessionmaker[Session],
) -> None:
    run_id = enqueue(session_factory, make_request("report('x', 4)"))
    with session_scope(session_factory) as s:
        claimed = queue.claim_run(db_session=s, worker_id="old", lease_seconds=30)
        assert claimed is not None
        # The old worker stopped renewing: its lease ran out a second ago.
        claimed.lease_expires_at = claimed.claimed_at - timedelta(seconds=1)
    with session_scope(session_factory) as s:
        run = queue.claim_run(db_session=s, worker_id="new", lease_seconds=30)
        assert run is not None and run.id == run_id and run.attempts == 2
        assert not queue.renew_lease(db_session=s, run_id=run_id, worker_id="old", lease_seconds=30)


def test_worker_rejects_a_result_of_the_wrong_shape(session_factory: sessionmaker[Session]) -> None:
    run_id = enqueue(session_factory, make_request("report('x', 5)"))
    with session_scope(session_factory) as s:
        queue.claim_run(db_session=s, worker_id="w", lease_seconds=30)
        with pytest.raises(results.InvalidResult):
            queue.complete_run(db_session=s, run_id=run_id, worker_id="w",
                                 result={"outcome": "great", "ranks": "many"})


def test_oversized_result_is_trimmed_before_storing() -> None:
    data = {"diagnosis": "ok", "ranks": [
        {"events": [{"t_ms": i, "kind": "x", "pad": "y" * 100} for i in range(5000)],
         "stdout": "", "stderr": ""}], "buckets": []}
    capped = results.cap_result(data, limit=100_000)
    assert len(json.dumps(capped)) <= 100_000
    assert "trimmed" in capped["diagnosis"]


def test_huge_reported_values_are_replaced_so_the_result_fits_the_cap() -> None:
    data = {"diagnosis": "ok", "buckets": [], "ranks": [
        {"rank": r, "events": [], "stdout": "", "stderr": "",
         "values": {f"v{i}": [0.5] * 100_000 for i in range(5)} | {"small": 1}} for r in range(2)]}
    capped = results.cap_result(data, limit=200_000)
    assert len(json.dumps(capped)) <= 200_000
    assert capped["ranks"][0]["values"]["small"] == 1
    assert str(capped["ranks"][0]["values"]["v0"]).startswith("(not stored:")
    assert "trimmed" in capped["diagnosis"]
