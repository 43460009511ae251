"""The run queue: workers claim runs with a lease, renew it, and complete, fail or release
them (app/leases.py holds what every job table shares; the fair lanes are the queue's own).

Workers claim with `FOR UPDATE SKIP LOCKED` on PostgreSQL and a single atomic UPDATE on
SQLite, and hold a lease they renew; a run whose lease ran out (its worker died) is
claimed again.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, literal, or_, select, update
from sqlalchemy.orm import Session

from app import leases, metrics
from app.db import utcnow
from app.verify.engine.result import RunResult
from app.verify.models import (
    PRIORITY_PRIVATE,
    PRIORITY_SHARED,
    RUN_FAILED,
    RUN_QUEUED,
    RUN_RUNNING,
    Run,
)
from app.verify.results import validate_result

# An infrastructure failure (worker died, pool broke) is retried this many times in all.
MAX_ATTEMPTS = 3
# Key of the PostgreSQL advisory lock private claims take turns under.
PRIVATE_CLAIM_LOCK = 0x5DD9_0001


def queue_state(*, db_session: Session) -> dict[str, Any]:
    """Runs by status, the queue's depth and how many workers hold a live lease (for /metrics)."""
    by_status = {str(st): int(n) for st, n in db_session.execute(
        select(Run.status, func.count()).group_by(Run.status)).all()}
    busy = db_session.scalar(select(func.count(func.distinct(Run.lease_owner))).where(
        Run.status == RUN_RUNNING, Run.lease_expires_at >= utcnow()))
    return {"by_status": by_status, "queued": by_status.get(RUN_QUEUED, 0),
            "busy_workers": int(busy or 0)}


def has_claimable(*, db_session: Session, shared_only: bool = False) -> bool:
    """True when some run waits for a worker (of the shared lane only, if asked); a read."""
    stmt = select(Run.id).where(leases.claimable(Run, utcnow()))
    if shared_only:
        stmt = stmt.where(Run.priority == PRIORITY_SHARED)
    return db_session.scalar(stmt.limit(1)) is not None


def next_lease_expiry(*, db_session: Session) -> Any:
    """When the soonest lease of a running run ends, or None."""
    return db_session.scalar(select(func.min(Run.lease_expires_at)).where(Run.status == RUN_RUNNING))


# Worker lanes: a "shared" worker claims only shared runs, so learners' and authors' own
# code can never hold up the bank's Verify; an "any" worker takes shared runs first and
# then private ones.
LANE_SHARED = "shared"
LANE_ANY = "any"
# "Lately", for the private lane's fair share: running time in this window counts against a
# share (an account or an address), so a backlog cannot keep a newcomer waiting.
FAIR_WINDOW_S = 600
# A share that has run this long in the window is "heavy": heavy shares take turns, one run
# executing at a time among all of them, so the other workers of the private lane stay free
# for shares that have run little (a newcomer's first Run starts at once, whatever backlogs
# wait). A learner's correct Run takes a second or two; sleeping or spinning runs add up.
HEAVY_S = 5.0
# Niceness of a private run's ranks: below the bank's runs always, and lowest of all for an
# address that has more private runs waiting (a burst, or a runaway), so that another
# learner's run, started beside it, gets most of the CPU.
PRIVATE_NICE = 10
BACKLOG_NICE = 19


def claim_run(*, db_session: Session, worker_id: str, lease_seconds: float,
              lane: str = LANE_ANY) -> Run | None:
    """Take the next run for this worker's lane and lease it to this worker.

    Shared runs first, oldest first. Then (lane "any") a private run, by fair share: a share
    is a signed-in class member's account, else the client address; at most one run per
    share executes at a time, and the next goes to the share with the least running time in
    the last FAIR_WINDOW_S (then the oldest), so no backlog can hold a newcomer. A run whose
    lease ran out (its worker died) is claimable again.
    """
    expire_stale_leases(db_session=db_session)
    now = utcnow()
    run = _pick(db_session, now, shared=True)
    if run is None and lane == LANE_ANY:
        run = _pick(db_session, now, shared=False)
    if run is None:
        return None
    if run.status == RUN_RUNNING:
        metrics.LEASE_RECLAIMS.inc()
    leases.take(run, worker_id=worker_id, lease_seconds=lease_seconds, now=now)
    db_session.flush()
    return run


def nice_for(*, db_session: Session, run: Run) -> int:
    """The niceness a claimed run's ranks get: 0 for shared runs; for private ones, lower
    than the bank's always, and lowest when the same address has more waiting."""
    if run.priority != PRIORITY_PRIVATE:
        return 0
    return BACKLOG_NICE if _waiting_from(db_session, run) else PRIVATE_NICE


def _address(column: Any) -> Any:
    return func.coalesce(column, "")


def _share(column_key: Any, column_ip: Any) -> Any:
    """A private run's share of the lane: its class member's account, else its address."""
    return func.coalesce(column_key, column_ip, "")


def _used(started: Any, finished: Any, now: datetime, since: datetime) -> float:
    """Seconds of a run's execution that fall in [since, now]."""
    if started is None:
        return 0.0
    if started.tzinfo is None:  # SQLite hands times back naive (they are UTC)
        started = started.replace(tzinfo=now.tzinfo)
    if finished is not None and finished.tzinfo is None:
        finished = finished.replace(tzinfo=now.tzinfo)
    end = min(finished or now, now)
    return max(0.0, (end - max(started, since)).total_seconds())


def _private_order(db_session: Session, now: datetime) -> list[int]:
    """The waiting private runs in the order they should start: first the share (a class
    member's account, else an address) with the least running time in the last
    FAIR_WINDOW_S, then the oldest; each share's own runs oldest first, none of a share that
    has a run executing (one at a time per share), and none of a heavy share (HEAVY_S) while
    another heavy share's run executes."""
    share = _share(Run.share_key, Run.requested_ip)
    waiting = db_session.execute(
        select(Run.id, share, Run.requested_at)
        .where(leases.claimable(Run, now), Run.priority == PRIORITY_PRIVATE)
        .order_by(Run.requested_at, Run.id)).all()
    if not waiting:
        return []
    busy = set(db_session.scalars(select(share).distinct().where(
        Run.priority == PRIORITY_PRIVATE, Run.status == RUN_RUNNING, Run.lease_expires_at >= now)))
    since = now - timedelta(seconds=FAIR_WINDOW_S)
    used: dict[str, float] = {}
    for key, started, finished in db_session.execute(
            select(share, Run.started_at, Run.finished_at).where(
                Run.priority == PRIORITY_PRIVATE, Run.started_at.is_not(None),
                or_(Run.finished_at.is_(None), Run.finished_at >= since))):
        used[key] = used.get(key, 0.0) + _used(started, finished, now, since)
    heavy_busy = any(used.get(k, 0.0) >= HEAVY_S for k in busy)
    first: dict[str, tuple[float, Any, int]] = {}
    queues: dict[str, list[int]] = {}
    for run_id, key, requested_at in waiting:
        if key in busy or (heavy_busy and used.get(key, 0.0) >= HEAVY_S):
            continue
        queues.setdefault(key, []).append(run_id)
        first.setdefault(key, (used.get(key, 0.0), requested_at, run_id))
    order = sorted(first, key=lambda k: first[k])
    return [queues[k][0] for k in order]


def _pick(db_session: Session, now: Any, *, shared: bool) -> Run | None:
    """The next claimable run of one lane, locked for this transaction (on SQLite the
    transaction already holds the write lock from its start, BEGIN IMMEDIATE)."""
    postgres = db_session.get_bind().dialect.name == "postgresql"
    if shared:
        stmt = select(Run.id).where(leases.claimable(Run, now), Run.priority == PRIORITY_SHARED)
        candidates: list[int] = []
    else:
        if postgres:
            # Private claims take turns across workers, so two cannot both start a second
            # run of one share between their reads and their writes.
            db_session.execute(select(func.pg_advisory_xact_lock(PRIVATE_CLAIM_LOCK)))
        candidates = _private_order(db_session, now)
    for attempt in range(8):  # another worker may hold the first candidate (PostgreSQL)
        if shared:
            run_id = db_session.scalar(stmt.order_by(Run.requested_at, Run.id).limit(1))
        else:
            run_id = candidates[attempt] if attempt < len(candidates) else None
        if run_id is None:
            return None
        locked = select(Run).where(Run.id == run_id, leases.claimable(Run, now))
        if postgres:
            locked = locked.with_for_update(skip_locked=True)
        run = db_session.scalar(locked)
        if run is not None:
            return run
        if shared:
            stmt = stmt.where(Run.id != run_id)
    return None


def _waiting_from(db_session: Session, run: Run) -> bool:
    """Whether the run's address has more private runs waiting behind this one."""
    return db_session.scalar(select(Run.id).where(
        Run.priority == PRIORITY_PRIVATE, Run.status == RUN_QUEUED, Run.id != run.id,
        _address(Run.requested_ip) == _address(literal(run.requested_ip))).limit(1)) is not None


def renew_lease(*, db_session: Session, run_id: int, worker_id: str, lease_seconds: float) -> bool:
    """Extend this worker's lease; False if the run is no longer this worker's."""
    return leases.renew(db_session=db_session, job=Run, job_id=run_id, worker_id=worker_id,
                        lease_seconds=lease_seconds)


def complete_run(*, db_session: Session, run_id: int, worker_id: str,
                 result: RunResult | dict[str, Any]) -> bool:
    """Store a validated result and mark the run done; False if the lease was lost."""
    return leases.finish(db_session=db_session, job=Run, job_id=run_id, worker_id=worker_id,
                         result=validate_result(result), finished_at=utcnow(),
                         failure_reason=None)


def fail_attempt(*, db_session: Session, run_id: int, worker_id: str, reason: str) -> str | None:
    """An infrastructure failure: queue the run again, or fail it after MAX_ATTEMPTS."""
    return leases.fail(db_session=db_session, job=Run, job_id=run_id, worker_id=worker_id,
                       reason=reason, max_attempts=MAX_ATTEMPTS)


def release_run(*, db_session: Session, run_id: int, worker_id: str) -> None:
    """Give a claimed run back without counting an attempt (a worker shutting down)."""
    leases.release(db_session=db_session, job=Run, job_id=run_id, worker_id=worker_id)


def expire_stale_leases(*, db_session: Session) -> int:
    """Fail runs whose lease ran out after their last allowed attempt; returns how many."""
    now = utcnow()
    res = db_session.execute(
        update(Run).where(Run.status == RUN_RUNNING, Run.lease_expires_at < now,
                          Run.attempts >= MAX_ATTEMPTS)
        .values(status=RUN_FAILED, finished_at=now, lease_owner=None,
                failure_reason="the worker running it stopped responding")
    )
    return int(res.rowcount)  # type: ignore[attr-defined]
