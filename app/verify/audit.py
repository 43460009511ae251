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
from collections.abc import Callable
from dataclasses import dataclass, field
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

# How often the audit looks whether its runs are finished, besides each time one of its own
# workers finishes one (another process's workers may run some).
PENDING_POLL_S = 1.0
# How soon a worker the admission refused asks again.
ADMISSION_RETRY_S = 0.05
# Runs `bank verify` always may execute at once: one per core and one more, which keeps the
# cores busy while a run starts, ends or waits on its peers (two at once on two cores left
# a sixth of the CPU idle). More only beside runs that wait (see CpuAdmission): a hang
# question's ranks must still reach their collective well inside its few-second timeout,
# and on a starved machine four busy runs at once on two cores made one arrive too late
# (a false FAIL).
AUDIT_CONCURRENCY = max(2, os.cpu_count() or 2) + 1
# The most runs at once. Many of the bank's runs only wait (a hang waits out its 2-8 s
# timeout with blocked ranks): the bank's 19 hang and timeout questions are queued first,
# and with room for only 8 they filled every place for the audit's first ten seconds while
# the cores were two-thirds idle. 16 leaves runs that compute their places beside them.
AUDIT_MAX_CONCURRENCY = 16
# A run older than this is taken to be waiting when the cores are idle: most runs are done
# in a tenth of that, and a hang's ranks block within a few hundred milliseconds.
WAITING_AFTER_S = 0.5
# Runs older than WAITING_AFTER_S are counted as waiting once this much of a core was idle
# over the last IDLE_WINDOW_S, so a run that still computes keeps its core.
ADMIT_IDLE_CORES = 0.75
IDLE_WINDOW_S = 0.25
# /proc/stat moves in ticks of 10 ms; the audit's refused workers, asking 20 times a second
# each, read it once per tick between them (reading it on every ask, with 16 workers, was
# 1.2 of the audit's 20 CPU-seconds).
SAMPLE_EVERY_S = 0.01
# Old runs are marked as waiting only while the cores were no busier than the young runs (a
# core each at most) and this much more: an old run computing on a core is not marked.
MARK_SLACK_CORES = 0.5


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
    already cached or queued are reused, so calling it again costs only reads. Of an
    exercise's starter and wrong solutions only the first combination is queued: no
    learner is shown a wrong solution's run, and the gate asks for the rest only of code
    that did not fail there (audit_bank).
    """
    versions = service.engine_versions()
    count = 0
    with session_scope(factory) as s:
        for revision in _in_queue_order(s, _targets(s, None)):
            count += len(gate.request_runs(db_session=s, revision=revision, versions=versions,
                                           requested_by="prefill", first_of_each=True))
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
    warm = threading.Event()

    def warm_up() -> None:
        try:
            warm_engine(settings.sandbox)
        finally:
            warm.set()

    threading.Thread(target=warm_up, name="engine-warmup", daemon=True).start()
    versions = service.engine_versions()
    # First every combination of the questions and reference solutions, but only the first of
    # each exercise's starter and wrong solutions: a wrong solution is shown wrong by one
    # combination where it fails a check. The rest of those combinations are queued for code
    # that did not fail on its first (usually none), so every one is still tried everywhere
    # before the gate can call it passing. Each question is checked as soon as its runs are
    # finished, while the others run.
    with session_scope(factory) as s:
        targets = _targets(s, slug)
        audited = {revision_id: _Audited(target_slug, revision_id)
                   for target_slug, revision_id in targets}
        for revision in _in_queue_order(s, targets):
            audited[revision.id].runs = {r.id for r in gate.request_runs(
                db_session=s, revision=revision, versions=versions, requested_by="bank-verify",
                fresh=fresh, first_of_each=True)}
    ran: set[int] = set().union(*(a.runs for a in audited.values()))
    audits: dict[int, QuestionAudit] = {}

    def settle(pending: set[int]) -> list[int]:
        """Check every question whose runs have all finished: record its verdict, or queue
        the rest of the combinations of any code that did not fail on its first. The runs
        it queued."""
        ready = [a for a in audited.values() if a.revision_id not in audits and not a.runs & pending]
        if not ready:
            return []
        queued: list[int] = []
        with session_scope(factory) as s:
            for a in ready:
                revision = s.get(QuestionRevision, a.revision_id)
                assert revision is not None
                g = gate.check(db_session=s, revision=revision, versions=versions, ran=ran)
                unrun = {c.key for c in g.combos if c.run is None and not c.needless}
                if unrun and not a.rest_queued:
                    a.rest_queued = True
                    more = {r.id for r in gate.request_runs(
                        db_session=s, revision=revision, versions=versions,
                        requested_by="bank-verify", fresh=fresh, keys=unrun)}
                    a.runs |= more
                    ran.update(more)
                    queued.extend(more)
                    continue
                gate.record(db_session=s, gate=g)
                audits[a.revision_id] = QuestionAudit(a.slug, g)
        return queued

    _execute(factory, settings, sorted(ran), on_progress, settle, warm)
    return [audits[revision_id] for _, revision_id in targets]


@dataclass
class _Audited:
    """One question of an audit: the runs asked for it so far."""

    slug: str
    revision_id: int
    runs: set[int] = field(default_factory=set)
    rest_queued: bool = False


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
    """How many runs `bank verify` executes at once: `floor` that compute (one per core and
    one more), plus, up to `ceiling`, runs that only wait.

    A run that only waits (ranks blocked in a collective until its timeout) leaves its
    cores idle. A run is counted as waiting once it is older than WAITING_AFTER_S while
    the machine's cores were idle over the last IDLE_WINDOW_S: at least ADMIT_IDLE_CORES,
    and no busier than the young runs (a core each at most) and MARK_SLACK_CORES explain.
    It keeps that mark until it ends, so it never again takes the place of a run that
    computes. An old run computing on one core of two with nothing young beside it is not
    marked; one computing beside a young run that has not yet taken its core can be (the
    young run's share is a guess), which lets one run more compute until it ends. The
    measurement is the whole machine's: on a machine busy with other work,
    nothing is marked and only `floor` runs at once. Nothing starts before `ready` is set
    (the engine's rank pool is warm): runs let in earlier would only wait for it, and
    then all start at once.
    """

    def __init__(self, floor: int, ceiling: int, *, cores: int | None = None,
                 sample: Callable[[], tuple[int, int] | None] = _cpu_jiffies,
                 clock: Callable[[], float] = time.monotonic,
                 ready: threading.Event | None = None) -> None:
        self.floor, self.ceiling = floor, max(floor, ceiling)
        self.cores = cores or os.cpu_count() or 1
        self._sample, self._clock = sample, clock
        self._ready = ready
        self._lock = threading.Lock()
        self._started: dict[int, float] = {}  # ticket -> when its run was let in
        self._waiting: set[int] = set()  # tickets of runs seen waiting
        self._tickets = 0
        self._samples: deque[tuple[float, tuple[int, int]]] = deque()
        self._idle: float | None = None  # the last reading, kept for SAMPLE_EVERY_S
        self.peak = 0

    @property
    def running(self) -> int:
        return len(self._started)

    def idle_cores(self) -> float | None:
        """Cores idle over about the last IDLE_WINDOW_S (None until that can be told).

        Called with the lock held (by `enter`): it keeps the samples and the last reading."""
        now = self._clock()
        if self._samples and now - self._samples[-1][0] < SAMPLE_EVERY_S:
            return self._idle
        sample = self._sample()
        if sample is None:
            return None
        self._samples.append((now, sample))
        while len(self._samples) > 1 and self._samples[1][0] <= now - IDLE_WINDOW_S:
            self._samples.popleft()
        then, before = self._samples[0]
        if now - then < IDLE_WINDOW_S or sample[1] <= before[1]:
            self._idle = None
        else:
            self._idle = (sample[0] - before[0]) / (sample[1] - before[1]) * self.cores
        return self._idle

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def enter(self) -> int | None:
        """A ticket if one more run may start now (hand it to `leave` when it ends)."""
        if self._ready is not None and not self._ready.is_set():
            return None
        with self._lock:
            if self.running >= self.ceiling:
                return None
            idle = self.idle_cores()
            now = self._clock()
            if idle is not None:
                old = [ticket for ticket, t in self._started.items()
                       if now - t >= WAITING_AFTER_S and ticket not in self._waiting]
                young = sum(1 for t in self._started.values() if now - t < WAITING_AFTER_S)
                # What the cores did is more than the young runs (a core each at most) and
                # half a core can explain: an old run computes, and none is marked.
                busy = self.cores - idle
                if old and idle >= ADMIT_IDLE_CORES and busy <= young + MARK_SLACK_CORES:
                    self._waiting.update(old)
            if self.running - len(self._waiting) >= self.floor:
                return None
            self._tickets += 1
            self._started[self._tickets] = now
            self.peak = max(self.peak, self.running)
            return self._tickets

    def leave(self, ticket: int) -> None:
        with self._lock:
            del self._started[ticket]
            self._waiting.discard(ticket)


class _AdmittedWorker(Worker):
    """A worker that claims a run only when the admission lets one more start, and says
    when it has finished one."""

    def __init__(self, *args: Any, admission: CpuAdmission, finished: threading.Event,
                 ended: deque[int], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.admission = admission
        self.finished = finished
        self.ended = ended
        self._refused = False

    def finished_run(self, run_id: int) -> None:
        self.ended.append(run_id)

    def run_once(self) -> bool:
        ticket = self.admission.enter()
        if ticket is None:
            self._refused = True
            return False
        try:
            worked = super().run_once()
        finally:
            self.admission.leave(ticket)
        if worked:
            self.finished.set()
        return worked

    def _idle_wait(self) -> float:
        # Refused by the admission, not out of work: look again shortly, without the
        # database (asking it for the next lease expiry 80 times a second, eight workers
        # woken every tenth of a second, was a sixth of the whole audit's CPU).
        if self._refused:
            self._refused = False
            return ADMISSION_RETRY_S
        return super()._idle_wait()


def _execute(
    factory: sessionmaker[Session], settings: Settings, run_ids: list[int],
    on_progress: Callable[[int, int], None] | None,
    settle: Callable[[set[int]], list[int]], ready: threading.Event | None = None,
) -> None:
    """Work the queue in this process until every one of these runs, and every run `settle`
    adds, is finished: AUDIT_CONCURRENCY runs that compute at once, and beside them runs
    that wait (CpuAdmission), from when `ready` is set."""
    stop, finished = threading.Event(), threading.Event()
    ended: deque[int] = deque()  # the runs this process's workers brought to their end
    admission = CpuAdmission(AUDIT_CONCURRENCY, AUDIT_MAX_CONCURRENCY, ready=ready)
    workers = [_AdmittedWorker(factory, settings, stop=stop, admission=admission,
                               finished=finished, ended=ended)
               for _ in range(AUDIT_MAX_CONCURRENCY)]
    threads = [threading.Thread(target=w.loop, name=f"audit-worker-{i}", daemon=True)
               for i, w in enumerate(workers)]
    for t in threads:
        t.start()

    def wake() -> None:
        for w in workers:
            w.wakeup.set()

    try:
        _wait(factory, run_ids, finished, ended, on_progress, settle, wake)
    finally:
        stop.set()
        wake()
        for t in threads:
            t.join()


def _wait(factory: sessionmaker[Session], run_ids: list[int], finished: threading.Event,
          ended: deque[int], on_progress: Callable[[int, int], None] | None,
          settle: Callable[[set[int]], list[int]], wake: Callable[[], None]) -> None:
    """Until every run is done or failed: those this process's workers end as they say so
    (`ended`), the rest (another process's workers may run some) looked up in the database
    every PENDING_POLL_S; after each change, `settle` may add runs."""
    total = len(run_ids)
    pending = set(run_ids)

    def still_pending() -> set[int]:
        with session_scope(factory) as s:
            return set(s.scalars(select(Run.id).where(Run.id.in_(pending),
                                                      Run.status.not_in((RUN_DONE, RUN_FAILED)))))

    pending = still_pending()
    looked = time.monotonic()
    while True:
        if added := settle(pending):
            pending.update(added)
            total += len(added)
            wake()
        if on_progress:
            on_progress(total - len(pending), total)
        if not pending:
            return
        finished.wait(PENDING_POLL_S)
        finished.clear()
        while ended:
            pending.discard(ended.popleft())
        if pending and time.monotonic() - looked >= PENDING_POLL_S:
            pending = still_pending()
            looked = time.monotonic()
