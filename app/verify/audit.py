"""`bank verify`: run every expectation of every question through the run cache."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

# Every table, so that foreign keys resolve in a CLI process that imports no views.
import app.models  # noqa: F401
from app.db import session_scope
from app.questions.models import STATUS_PUBLISHED, Question, QuestionRevision
from app.questions.service import revision_doc
from app.settings import Settings
from app.verify import service
from app.verify.expectations import CheckResult, evaluate
from app.verify.models import RUN_DONE, RUN_FAILED, Run
from app.verify.worker import Worker

# Runs `bank verify` executes at once.
AUDIT_CONCURRENCY = 4


@dataclass
class ComboAudit:
    slug: str
    params: dict[str, Any]
    world_size: int
    run_id: int
    status: str
    outcome: str | None
    checks: list[CheckResult] = field(default_factory=list)
    failure: str | None = None

    @property
    def passed(self) -> bool:
        return self.status == RUN_DONE and bool(self.checks) and all(c.passed for c in self.checks)


@dataclass
class QuestionAudit:
    slug: str
    revision_id: int
    combos: list[ComboAudit] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.combos) and all(c.passed for c in self.combos)


def _targets(s: Session, slug: str | None) -> list[tuple[str, QuestionRevision]]:
    # Published questions only: an author's unfinished draft is audited by its publish gate.
    stmt = select(Question).where(Question.status == STATUS_PUBLISHED, Question.has_snippet)
    if slug:
        stmt = stmt.where(Question.slug == slug)
    return [(q.slug, q.current_revision)
            for q in s.scalars(stmt.order_by(Question.topic, Question.slug)).unique()
            if q.current_revision is not None]


def _plan(
    factory: sessionmaker[Session], pick: Callable[[Session], list[tuple[str, QuestionRevision]]],
    fresh: bool, versions: tuple[str, str],
) -> list[tuple[QuestionAudit, list[tuple[int, dict[str, Any], int]]]]:
    torch_v, harness_v = versions
    plan = []
    with session_scope(factory) as s:
        for slug, rev in pick(s):
            doc = revision_doc(rev)
            if doc.verify is None:
                continue
            qa = QuestionAudit(slug, rev.id)
            runs = []
            for combo in service.audit_combinations(doc.verify):
                req = service.request_for(doc, combo, torch_version=torch_v,
                                          harness_version=harness_v, revision_id=rev.id,
                                          requested_by="bank-verify")
                run, _ = service.request_run(db_session=s, req=req, fresh=fresh)
                runs.append((run.id, req.params, req.world_size))
            plan.append((qa, runs))
    return plan


def queue_published(factory: sessionmaker[Session], *, versions: tuple[str, str] | None = None) -> int:
    """Queue a run for every audited knob combination of every published question; how many.

    Called after an import or a publish: workers execute the runs in the background,
    so a learner's first Verify of any of these combinations is a cache hit. Runs
    already cached or queued are reused, so calling it again costs only reads.
    """
    if versions is None:
        from app.verify.engine import HARNESS_VERSION, torch_version

        versions = (torch_version(), HARNESS_VERSION)
    plan = _plan(factory, lambda s: _targets(s, None), False, versions)
    return sum(len(runs) for _, runs in plan)


def audit_bank(
    factory: sessionmaker[Session], settings: Settings, *, slug: str | None = None,
    fresh: bool = False, on_progress: Callable[[int, int], None] | None = None,
    versions: tuple[str, str] | None = None,
) -> list[QuestionAudit]:
    """Queue every audited knob combination, execute what is not cached, check and record verdicts."""
    if versions is None:
        from app.verify.views import engine_versions

        versions = engine_versions()
    return _execute(factory, settings,
                    _plan(factory, lambda s: _targets(s, slug), fresh, versions), versions,
                    on_progress)


def audit_revision(
    factory: sessionmaker[Session], settings: Settings, revision_id: int, *, fresh: bool = False,
    versions: tuple[str, str] | None = None,
) -> QuestionAudit | None:
    """Run one revision's expectations (a draft's, say) and record its verdict."""
    if versions is None:
        from app.verify.views import engine_versions

        versions = engine_versions()

    def pick(s: Session) -> list[tuple[str, QuestionRevision]]:
        rev = s.get(QuestionRevision, revision_id)
        if rev is None:
            return []
        q = s.get(Question, rev.question_id)
        return [(q.slug if q else "?", rev)]

    audits = _execute(factory, settings, _plan(factory, pick, fresh, versions), versions, None)
    return audits[0] if audits else None


def _execute(
    factory: sessionmaker[Session], settings: Settings,
    plan: list[tuple[QuestionAudit, list[tuple[int, dict[str, Any], int]]]],
    versions: tuple[str, str], on_progress: Callable[[int, int], None] | None,
) -> list[QuestionAudit]:
    run_ids = [rid for _, runs in plan for rid, _, _ in runs]
    total = len(run_ids)
    # Several runs at once: many of the bank's runs only wait (a hang waits out its
    # timeout with idle ranks), so running them side by side costs little CPU.
    stop = threading.Event()
    workers = [Worker(factory, settings, stop=stop) for _ in range(AUDIT_CONCURRENCY)]
    threads = [threading.Thread(target=w.loop, name=f"audit-worker-{i}", daemon=True)
               for i, w in enumerate(workers)]
    for t in threads:
        t.start()

    def pending() -> int:
        with session_scope(factory) as s:
            rows = s.scalars(select(Run.status).where(Run.id.in_(run_ids))).all()
        return sum(1 for st in rows if st not in (RUN_DONE, RUN_FAILED))

    left = pending()
    if on_progress:
        on_progress(total - left, total)
    try:
        while left:
            # Executed here; a server's workers sharing the database may take some too.
            time.sleep(0.1)
            for w in workers:
                w.wakeup.set()
            left = pending()
            if on_progress:
                on_progress(total - left, total)
    finally:
        stop.set()
        for w in workers:
            w.wakeup.set()
        for t in threads:
            t.join()

    audits = []
    with session_scope(factory) as s:
        for qa, runs in plan:
            rev = s.get(QuestionRevision, qa.revision_id)
            assert rev is not None
            doc = revision_doc(rev)
            assert doc.verify is not None
            for run_id, params, world_size in runs:
                run = s.get(Run, run_id)
                assert run is not None
                combo = ComboAudit(qa.slug, params, world_size, run_id, run.status,
                                   (run.result or {}).get("outcome"))
                if run.status == RUN_DONE and run.result is not None:
                    combo.checks = evaluate(doc.verify.expect, run.result, params, world_size)
                else:
                    combo.failure = run.failure_reason or "the run did not finish"
                qa.combos.append(combo)
            service.record_verdict(
                db_session=s, revision_id=qa.revision_id, torch_version=versions[0],
                passed=qa.passed,
                checks=[{"params": c.params, "world_size": c.world_size, "run_id": c.run_id,
                         "failure": c.failure, "checks": [x.to_json() for x in c.checks]}
                        for c in qa.combos],
            )
            audits.append(qa)
    return audits
