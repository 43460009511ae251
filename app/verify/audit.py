"""`ddpdrill bank verify`: the gate (app.verify.gate) for every published question at once.

Queues every audited knob combination through the run cache, executes what is
not cached in this process (a server's workers sharing the database may take
some too), then checks each question with the same rule as the Publish button
and records its verdict.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.db import session_scope
from app.questions.models import STATUS_PUBLISHED, Question, QuestionRevision
from app.questions.service import revision_doc
from app.settings import Settings
from app.verify import gate, service
from app.verify.models import RUN_DONE, RUN_FAILED, Run
from app.verify.worker import Worker, warm_engine

# How long to wait before looking again when another process holds every queued run.
IDLE_POLL_S = 0.1
# Runs `bank verify` always may execute at once: one per core. More only beside runs that
# wait (see CpuAdmission): a hang question's ranks must still reach their collective well
# inside its few-second timeout, and on a starved machine four busy runs at once on two
# cores made one arrive too late (a false FAIL).
AUDIT_CONCURRENCY = max(2, os.cpu_count() or 2)
# The most runs at once when the machine is idle. Many of the bank's runs only wait (a
# hang waits out its 2-8 s timeout with blocked ranks), and they are most of its run time.
AUDIT_MAX_CONCURRENCY = 8
# A run older than this is taken to be waiting when the cores are idle: most runs are done
# in a tenth of that, and a hang's ranks block within a few hundred milliseconds.
WAITING_AFTER_S = 0.5
# A run beyond one per core starts only when this much of a core was idle over the last
# IDLE_WINDOW_S, so a run that still computes keeps its core.
ADMIT_IDLE_CORES = 0.75
IDLE_WINDOW_S = 0.25


@dataclass
class QuestionAudit:
    slug: str
    gate: gate.Gate

    @property
    def passed(self) -> bool:
        return self.gate.passed


def _targets(db_session: Session, slug: str | None) -> list[tuple[str, int]]:
    """(slug, current revision id) of every published question with a snippet."""
    # Published questions only: an author's unfinished draft is checked by its publish gate.
    stmt = select(Question.slug, Question.current_revision_id).where(
        Question.status == STATUS_PUBLISHED, Question.has_snippet,
        Question.current_revision_id.is_not(None))
    if slug:
        stmt = stmt.where(Question.slug == slug)
    rows = db_session.execute(stmt.order_by(Question.topic, Question.slug))
    return [(s, r) for s, r in rows if r is not None]


def queue_published(factory: sessionmaker[Session]) -> int:
    """Queue a run for every audited knob combination of every published question; how many.

    Called after an import or a publish: workers execute the runs in the background,
    so a learner's first Verify of any of these combinations is a cache hit. Runs
    already cached or queued are reused, so calling it again costs only reads.
    """
    versions = service.engine_versions()
    count = 0
    with session_scope(factory) as s:
        for revision in _in_queue_order(s, _targets(s, None)):
            count += len(gate.request_runs(db_session=s, revision=revision, versions=versions,
                                           requested_by="prefill"))
    return count


def _in_queue_order(db_session: Session, targets: list[tuple[str, int]]) -> list[QuestionRevision]:
    """The targets' revisions in the order to queue their runs (workers claim oldest first).

    A question with a time limit shorter than the rest usually waits it out (a hang), so
    its runs go first: their waiting overlaps the other runs, instead of one starting
    last and everybody waiting for it.
    """
    revisions = [db_session.get(QuestionRevision, revision_id) for _slug, revision_id in targets]

    def time_limit(revision: QuestionRevision) -> float:
        verify = revision_doc(revision).verify
        return verify.timeout_s if verify is not None else 0.0

    return sorted((r for r in revisions if r is not None), key=time_limit)


def audit_bank(
    factory: sessionmaker[Session], settings: Settings, *, slug: str | None = None,
    fresh: bool = False, on_progress: Callable[[int, int], None] | None = None,
) -> list[QuestionAudit]:
    """Run every published question's gate, executing what is not cached; record the verdicts."""
    # The rank pool starts (torch imports) while the runs are planned, not after.
    threading.Thread(target=warm_engine, args=(settings.sandbox,), name="engine-warmup",
                     daemon=True).start()
    versions = service.engine_versions()
    with session_scope(factory) as s:
        targets = _targets(s, slug)
        run_ids: list[int] = []
        for revision in _in_queue_order(s, targets):
            runs = gate.request_runs(db_session=s, revision=revision, versions=versions,
                                     requested_by="bank-verify", fresh=fresh)
            run_ids.extend(r.id for r in runs)
    _execute(factory, settings, run_ids, on_progress)
    audits = []
    with session_scope(factory) as s:
        for target_slug, revision_id in targets:
            current = s.get(QuestionRevision, revision_id)
            assert current is not None
            g = gate.check(db_session=s, revision=current, versions=versions)
            gate.record(db_session=s, gate=g)
            audits.append(QuestionAudit(target_slug, g))
    return audits


def _cpu_jiffies() -> tuple[int, int] | None:
    """(idle, total) CPU time of the whole machine so far, from /proc/stat (None elsewhere)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return idle, sum(fields[:8])


class CpuAdmission:
    """How many runs `bank verify` executes at once: one per core (`floor`), plus, up to
    `ceiling`, runs beside those that only wait.

    A run that only waits (ranks blocked in a collective until its timeout) leaves its
    cores idle. So a run may start while fewer than `floor` runs are young (started less
    than WAITING_AFTER_S ago) and the cores were idle over the last IDLE_WINDOW_S; older
    runs that still compute keep the cores busy and nothing more starts. The measurement
    is the whole machine's: on a machine busy with other work, only `floor` runs at once.
    """

    def __init__(self, floor: int, ceiling: int, *, cores: int | None = None,
                 sample: Callable[[], tuple[int, int] | None] = _cpu_jiffies,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.floor, self.ceiling = floor, max(floor, ceiling)
        self.cores = cores or os.cpu_count() or 1
        self._sample, self._clock = sample, clock
        self._lock = threading.Lock()
        self._started: dict[int, float] = {}  # ticket -> when its run was let in
        self._tickets = 0
        self._samples: deque[tuple[float, tuple[int, int]]] = deque()
        self.peak = 0

    @property
    def running(self) -> int:
        return len(self._started)

    def idle_cores(self) -> float | None:
        """Cores idle over about the last IDLE_WINDOW_S (None until that can be told)."""
        now, sample = self._clock(), self._sample()
        if sample is None:
            return None
        self._samples.append((now, sample))
        while len(self._samples) > 1 and self._samples[1][0] <= now - IDLE_WINDOW_S:
            self._samples.popleft()
        then, before = self._samples[0]
        if now - then < IDLE_WINDOW_S or sample[1] <= before[1]:
            return None
        return (sample[0] - before[0]) / (sample[1] - before[1]) * self.cores

    def enter(self) -> int | None:
        """A ticket if one more run may start now (hand it to `leave` when it ends)."""
        with self._lock:
            idle = self.idle_cores()
            now = self._clock()
            if self.running >= self.floor:
                young = sum(1 for t in self._started.values() if now - t < WAITING_AFTER_S)
                if (self.running >= self.ceiling or young >= self.floor
                        or idle is None or idle < ADMIT_IDLE_CORES):
                    return None
            self._tickets += 1
            self._started[self._tickets] = now
            self.peak = max(self.peak, self.running)
            return self._tickets

    def leave(self, ticket: int) -> None:
        with self._lock:
            del self._started[ticket]


class _AdmittedWorker(Worker):
    """A worker that claims a run only when the admission lets one more start."""

    def __init__(self, *args: Any, admission: CpuAdmission, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.admission = admission

    def run_once(self) -> bool:
        ticket = self.admission.enter()
        if ticket is None:
            return False
        try:
            return super().run_once()
        finally:
            self.admission.leave(ticket)


def _execute(
    factory: sessionmaker[Session], settings: Settings, run_ids: list[int],
    on_progress: Callable[[int, int], None] | None,
) -> None:
    """Work the queue in this process until every one of these runs is finished:
    AUDIT_CONCURRENCY runs at once, more while the cores are idle (CpuAdmission)."""
    total = len(run_ids)
    stop = threading.Event()
    admission = CpuAdmission(AUDIT_CONCURRENCY, AUDIT_MAX_CONCURRENCY)
    workers = [_AdmittedWorker(factory, settings, stop=stop, admission=admission)
               for _ in range(AUDIT_MAX_CONCURRENCY)]
    threads = [threading.Thread(target=w.loop, name=f"audit-worker-{i}", daemon=True)
               for i, w in enumerate(workers)]
    for t in threads:
        t.start()
    try:
        _wait(factory, run_ids, total, workers, on_progress)
    finally:
        stop.set()
        for w in workers:
            w.wakeup.set()
        for t in threads:
            t.join()


def _wait(factory: sessionmaker[Session], run_ids: list[int], total: int,
          workers: Sequence[Worker],
          on_progress: Callable[[int, int], None] | None) -> None:

    def pending() -> int:
        with session_scope(factory) as s:
            rows = s.scalars(select(Run.status).where(Run.id.in_(run_ids))).all()
        return sum(1 for st in rows if st not in (RUN_DONE, RUN_FAILED))

    left = pending()
    while True:
        if on_progress:
            on_progress(total - left, total)
        if not left:
            return
        time.sleep(IDLE_POLL_S)
        for w in workers:
            w.wakeup.set()
        left = pending()
