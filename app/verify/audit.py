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
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.db import session_scope
from app.questions.models import STATUS_PUBLISHED, Question, QuestionRevision
from app.settings import Settings
from app.verify import gate, service
from app.verify.models import RUN_DONE, RUN_FAILED, Run
from app.verify.worker import Worker, warm_engine

# How long to wait before looking again when another process holds every queued run.
IDLE_POLL_S = 0.1
# Runs `bank verify` executes at once: many of the bank's runs only wait (a hang waits
# out its timeout with idle ranks), so running them side by side costs little CPU. One
# per core, not more: a hang question's ranks must still reach their collective well
# inside its few-second timeout, and on a starved machine four at once on two cores
# made one arrive too late (a false FAIL).
AUDIT_CONCURRENCY = max(2, os.cpu_count() or 2)


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
        for _slug, revision_id in _targets(s, None):
            revision = s.get(QuestionRevision, revision_id)
            assert revision is not None
            count += len(gate.request_runs(db_session=s, revision=revision, versions=versions,
                                           requested_by="prefill"))
    return count


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
        for _slug, revision_id in targets:
            revision = s.get(QuestionRevision, revision_id)
            assert revision is not None
            runs = gate.request_runs(db_session=s, revision=revision, versions=versions,
                                     requested_by="bank-verify", fresh=fresh)
            run_ids.extend(r.id for r in runs)
    _execute(factory, settings, run_ids, on_progress)
    audits = []
    with session_scope(factory) as s:
        for target_slug, revision_id in targets:
            revision = s.get(QuestionRevision, revision_id)
            assert revision is not None
            g = gate.check(db_session=s, revision=revision, versions=versions)
            gate.record(db_session=s, gate=g)
            audits.append(QuestionAudit(target_slug, g))
    return audits


def _execute(
    factory: sessionmaker[Session], settings: Settings, run_ids: list[int],
    on_progress: Callable[[int, int], None] | None,
) -> None:
    """Work the queue in this process, AUDIT_CONCURRENCY runs at once, until every one of
    these runs is finished."""
    total = len(run_ids)
    stop = threading.Event()
    workers = [Worker(factory, settings, stop=stop) for _ in range(AUDIT_CONCURRENCY)]
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


def _wait(factory: sessionmaker[Session], run_ids: list[int], total: int, workers: list[Worker],
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
