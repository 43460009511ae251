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
# Runs `bank verify` executes at once: one per core and one more, which keeps the cores busy
# while a run starts, ends or waits on its peers. Not more: a hang question's ranks must
# still reach their collective well inside its few-second timeout, and on a starved machine
# a rank that arrives too late turns a right answer into a false FAIL.
AUDIT_CONCURRENCY = (os.cpu_count() or 1) + 1


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
                                           requested_by=gate.PREFILL, first_of_each=True))
            # Every run already cached: the verdict is known now (else a worker records it
            # when the last of them finishes).
            gate.record_if_complete(db_session=s, revision_id=revision.id, versions=versions)
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

    _execute(factory, settings, sorted(ran), on_progress, settle)
    return [audits[revision_id] for _, revision_id in targets]


@dataclass
class _Audited:
    """One question of an audit: the runs asked for it so far."""

    slug: str
    revision_id: int
    runs: set[int] = field(default_factory=set)
    rest_queued: bool = False


class _AuditWorker(Worker):
    """A worker that says when it has brought a run to its end."""

    def __init__(self, *args: Any, finished: threading.Event, ended: deque[int],
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.finished = finished
        self.ended = ended

    def finished_run(self, run_id: int) -> None:
        self.ended.append(run_id)
        self.finished.set()


def _execute(
    factory: sessionmaker[Session], settings: Settings, run_ids: list[int],
    on_progress: Callable[[int, int], None] | None,
    settle: Callable[[set[int]], list[int]],
) -> None:
    """Work the queue in this process with AUDIT_CONCURRENCY workers until every one of these
    runs, and every run `settle` adds, is finished."""
    stop, finished = threading.Event(), threading.Event()
    ended: deque[int] = deque()  # the runs this process's workers brought to their end
    workers = [_AuditWorker(factory, settings, stop=stop, finished=finished, ended=ended)
               for _ in range(AUDIT_CONCURRENCY)]
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
