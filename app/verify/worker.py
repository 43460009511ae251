"""Workers: claim a run, execute it on the engine while renewing the lease, store the result.

A worker is handed ids, never ORM objects, and opens a short session for each
step, so no database connection is held while ranks run.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from app import metrics
from app.db import read_sessionmaker, session_scope, utcnow
from app.settings import Settings
from app.verify import gate, queue, results, service
from app.verify.models import RUN_FAILED

log = logging.getLogger("ddpdrill.worker")

# How often an idle worker looks for work when nobody wakes it. A request wakes its own
# process's workers by an event and, on PostgreSQL, every process's by NOTIFY; so this is
# how long a run queued on SQLite by another process (`ddpdrill worker` beside `serve`, a
# bank import) waits at most, and it covers a lost wake-up. The look is a read.
POLL_SECONDS = 2.0
# A lease is renewed this many times over its length, so one late renewal (a busy
# database) does not lose it.
RENEWALS_PER_LEASE = 3
# Channel of the PostgreSQL notification sent when a run is queued.
NOTIFY_CHANNEL = service.NOTIFY_CHANNEL


@dataclass(frozen=True)
class Job:
    run_id: int
    snippet_text: str
    world_size: int
    params: dict[str, Any]
    timeout_s: float
    # The ranks' niceness (app.verify.queue.nice_for decides it).
    nice: int = 0
    # A prefill run's revision: its gate's verdict is recorded once its runs are all done.
    verdict_for: int | None = None


def new_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Worker:
    """One worker loop; several may run in threads of one process or in many processes."""

    def __init__(
        self,
        factory: sessionmaker[Session],
        settings: Settings,
        *,
        stop: threading.Event | None = None,
        wakeup: threading.Event | None = None,
        engine_factory: Callable[[], Any] | None = None,
        worker_id: str | None = None,
        lane: str = queue.LANE_ANY,
    ) -> None:
        self.factory = factory
        self.read_factory = read_sessionmaker(factory.kw["bind"])
        self.settings = settings
        self.stop = stop or threading.Event()
        self.wakeup = wakeup or threading.Event()
        self.worker_id = worker_id or new_worker_id()
        self._engine_factory = engine_factory
        self.lane = lane
        self.completed = 0
        # The run in hand, so a pool shutting down can give it back.
        self.current_run_id: int | None = None
        # Whether the last claim found a run: while the queue has work, a claim goes
        # straight to the write, without the read that keeps an idle worker's poll cheap.
        self._found_last = False

    def _engine(self) -> Any:
        if self._engine_factory is not None:
            return self._engine_factory()
        from app.verify.engine import get_engine

        return get_engine(sandbox=self.settings.sandbox)

    def claim(self) -> Job | None:
        # Look before taking the write lock, unless the last claim found a run: an idle
        # worker's poll is then a read.
        if not self._found_last:
            with session_scope(self.read_factory) as s:
                if not queue.has_claimable(db_session=s,
                                             shared_only=self.lane == queue.LANE_SHARED):
                    return None
        self._found_last = False  # and so if the claim fails (a lock, a blip): read first again
        with session_scope(self.factory) as s:
            run = queue.claim_run(db_session=s, worker_id=self.worker_id,
                                    lease_seconds=self.settings.lease_seconds, lane=self.lane)
            if run is None:
                return None
            self._found_last = True
            metrics.RUNS_CLAIMED.inc()
            return Job(run.id, run.snippet_text, run.world_size, dict(run.params or {}),
                       run.timeout_s, queue.nice_for(db_session=s, run=run),
                       run.question_revision_id if run.requested_by == gate.PREFILL else None)

    def _renew_until(self, job: Job, done: threading.Event) -> None:
        interval = max(0.1, self.settings.lease_seconds / RENEWALS_PER_LEASE)
        while not done.wait(interval):
            try:
                with session_scope(self.factory) as s:
                    if not queue.renew_lease(db_session=s, run_id=job.run_id,
                                               worker_id=self.worker_id,
                                               lease_seconds=self.settings.lease_seconds):
                        log.warning("lost the lease on run %s", job.run_id)
                        return
            except Exception:  # a database blip: try again on the next tick
                log.exception("renewing the lease on run %s failed", job.run_id)

    def execute(self, job: Job) -> None:
        """Run one claimed job to a stored result, or record an infrastructure failure."""
        from app.verify.engine import EngineFailure, Limits

        done = threading.Event()
        renewer = threading.Thread(target=self._renew_until, args=(job, done), daemon=True,
                                   name=f"lease-{job.run_id}")
        renewer.start()
        try:
            base = Limits.from_settings(self.settings)
            limits = type(base)(**{**_fields(base), "timeout_s": job.timeout_s, "nice": job.nice})
            started = time.monotonic()
            result = self._engine().run(job.snippet_text, world_size=job.world_size,
                                        params=job.params, limits=limits)
            metrics.RUN_SECONDS.labels(str(result.outcome)).observe(time.monotonic() - started)
        except EngineFailure as exc:
            done.set()
            self._fail(job, f"verify engine failure: {exc}")
            return
        except Exception as exc:
            done.set()
            log.exception("run %s crashed the worker", job.run_id)
            self._fail(job, f"worker error: {type(exc).__name__}: {exc}")
            return
        done.set()
        renewer.join(timeout=5)
        try:
            with session_scope(self.factory) as s:
                stored = queue.complete_run(db_session=s, run_id=job.run_id,
                                              worker_id=self.worker_id, result=result)
        except results.InvalidResult as exc:
            self._fail(job, str(exc))
            return
        if stored:
            self.completed += 1
            if job.verdict_for is not None:
                self._record_verdict(job.verdict_for)
            self.finished_run(job.run_id)
        else:
            log.warning("run %s finished after its lease passed to another worker", job.run_id)

    def _record_verdict(self, revision_id: int) -> None:
        """The prefill's last run of a revision done: record its gate's verdict (a failure to
        is logged; the next prefill or `bank verify` records it)."""
        try:
            with session_scope(self.factory) as s:
                gate.record_if_complete(db_session=s, revision_id=revision_id,
                                        versions=service.engine_versions())
        except Exception:
            log.exception("recording the verdict of revision %s failed", revision_id)

    def _fail(self, job: Job, reason: str) -> None:
        with session_scope(self.factory) as s:
            status = queue.fail_attempt(db_session=s, run_id=job.run_id,
                                          worker_id=self.worker_id, reason=reason)
        if status == RUN_FAILED:
            self.finished_run(job.run_id)

    def finished_run(self, run_id: int) -> None:
        """Called when this worker has brought a run to its end (done, or failed for good)."""

    def _idle_wait(self) -> float:
        """Seconds to sleep when idle: until the next lease runs out, at most POLL_SECONDS.

        Nobody announces a dead worker, so the survivors look when its lease ends.
        """
        try:
            with session_scope(self.read_factory) as s:
                expiry = queue.next_lease_expiry(db_session=s)
        except Exception:
            log.exception("worker %s: reading leases failed", self.worker_id)
            return POLL_SECONDS
        if expiry is None:
            return POLL_SECONDS
        return min(POLL_SECONDS, max(0.05, (expiry - utcnow()).total_seconds() + 0.05))

    def run_once(self) -> bool:
        """Claim and execute one run; False when there was nothing to do."""
        job = self.claim()
        if job is None:
            return False
        self.current_run_id = job.run_id
        try:
            self.execute(job)
        finally:
            self.current_run_id = None
        return True

    def loop(self) -> None:
        """Work until `stop` is set; the run in hand is always finished first."""
        log.info("worker %s started", self.worker_id)
        while not self.stop.is_set():
            try:
                worked = self.run_once()
            except Exception:
                log.exception("worker %s: claiming failed", self.worker_id)
                worked = False
            if not worked:
                self.wakeup.wait(self._idle_wait())
                self.wakeup.clear()
        log.info("worker %s stopped after %d runs", self.worker_id, self.completed)


def warm_engine(sandbox: bool = True) -> None:
    """Start the rank pool (of the sandboxed engine, or the unconfined one) before any run."""
    from app.verify.engine import EngineFailure, get_engine

    try:
        # One trivial run forks the forkserver and imports torch in it.
        get_engine(sandbox=sandbox).run("pass", world_size=1)
    except EngineFailure as exc:
        # Shutting down while warming closes the pool under us: nothing went wrong. Any
        # other engine failure is reported again, in full, by the first real run.
        log.warning("warming the verify engine stopped: %s", exc)
    except Exception:
        log.exception("warming the verify engine failed")


def _fields(obj: Any) -> dict[str, Any]:
    if hasattr(obj, "model_dump"):
        return dict(obj.model_dump())
    import dataclasses

    return dataclasses.asdict(obj)


class WorkerPool:
    """N worker threads in this process, sharing one stop flag and one wake-up signal.

    With two or more, the first claims shared runs only (the bank's Verify, the publish
    gate), so private code (learners' exercises, authors' Run now) never delays them.
    """

    def __init__(self, factory: sessionmaker[Session], settings: Settings, count: int) -> None:
        self.factory = factory
        self.stop = threading.Event()
        self.wakeup = threading.Event()
        lanes = [queue.LANE_SHARED if i == 0 and count > 1 else queue.LANE_ANY
                 for i in range(count)]
        self.workers = [Worker(factory, settings, stop=self.stop, wakeup=self.wakeup, lane=lane)
                        for lane in lanes]
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        metrics.WORKERS_IN_PROCESS.inc(len(self.workers))
        for i, w in enumerate(self.workers):
            t = threading.Thread(target=w.loop, name=f"verify-worker-{i}", daemon=True)
            t.start()
            self.threads.append(t)
        bind = self.factory.kw["bind"]
        if bind.dialect.name == "postgresql":
            t = threading.Thread(target=self._listen, args=(bind,), name="verify-listen", daemon=True)
            t.start()

    def _listen(self, bind: Any) -> None:
        """Wake the workers when any process queues a run (PostgreSQL LISTEN/NOTIFY)."""
        import psycopg

        dsn = bind.url.set(drivername="postgresql").render_as_string(hide_password=False)
        while not self.stop.is_set():
            try:
                with psycopg.connect(dsn, autocommit=True) as conn:
                    conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    # A run queued while we were not listening is found by this look.
                    self.wakeup.set()
                    while not self.stop.is_set():
                        for _note in conn.notifies(timeout=1.0, stop_after=1):
                            self.wakeup.set()
            except Exception:
                log.exception("listening for queued runs failed; retrying")
                self.stop.wait(POLL_SECONDS)

    def notify(self) -> None:
        """Wake an idle worker now instead of at its next poll."""
        self.wakeup.set()

    def shutdown(self, timeout: float | None = None) -> None:
        """Stop taking work and wait for the runs in hand to finish.

        A run still going after `timeout` is given back to the queue without counting an
        attempt, so another worker takes it at once instead of after its lease.
        """
        if not self.stop.is_set() and self.threads:
            metrics.WORKERS_IN_PROCESS.dec(len(self.workers))
        self.stop.set()
        self.wakeup.set()
        for t in self.threads:
            t.join(timeout)
        for w in self.workers:
            run_id = w.current_run_id
            if run_id is not None:
                with session_scope(w.factory) as s:
                    queue.release_run(db_session=s, run_id=run_id, worker_id=w.worker_id)
