"""Jobs held with a lease: what every job table (verify runs, FSRS fits) shares.

A job row has a status (queued, running, done, failed), a count of attempts, and while it
runs a lease: its worker (`lease_owner`) and when the lease ends (`lease_expires_at`). A
worker claims a queued job, or a running one whose lease ran out (its worker died),
renews the lease while it works, and ends it: done, failed (queued again until the last
allowed attempt), or released (given back without counting an attempt). Every UPDATE
checks the lease's owner, so a worker whose lease passed to another changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import and_, case, or_, select, update
from sqlalchemy.orm import Session

QUEUED = "queued"
RUNNING = "running"
DONE = "done"
FAILED = "failed"
# A failure's reason is kept to this many characters.
MAX_REASON = 2000


def claimable(job: Any, now: datetime) -> Any:
    """Rows of `job` (a mapped class) a worker may claim at `now`."""
    return or_(job.status == QUEUED, and_(job.status == RUNNING, job.lease_expires_at < now))


def owned(job: Any, job_id: int, worker_id: str) -> Any:
    """The row `job_id` while `worker_id` holds its lease."""
    return and_(job.id == job_id, job.lease_owner == worker_id, job.status == RUNNING)


def take(row: Any, *, worker_id: str, lease_seconds: float, now: datetime) -> None:
    """Lease a claimable row (locked by the caller's transaction) to this worker, which
    starts it at once."""
    row.status, row.lease_owner = RUNNING, worker_id
    row.lease_expires_at = now + timedelta(seconds=lease_seconds)
    row.claimed_at = row.started_at = now
    row.attempts += 1


def claim(*, db_session: Session, job: Any, worker_id: str, lease_seconds: float,
          order_by: Sequence[Any]) -> Any | None:
    """Take the first claimable row of `job` in `order_by` and lease it to this worker:
    `FOR UPDATE SKIP LOCKED` on PostgreSQL; on SQLite the transaction holds the write lock
    from its start (BEGIN IMMEDIATE)."""
    now = datetime.now(UTC)
    stmt = select(job).where(claimable(job, now)).order_by(*order_by).limit(1)
    if db_session.get_bind().dialect.name == "postgresql":
        stmt = stmt.with_for_update(skip_locked=True)
    row = db_session.scalar(stmt)
    if row is None:
        return None
    take(row, worker_id=worker_id, lease_seconds=lease_seconds, now=now)
    db_session.flush()
    return row


def renew(*, db_session: Session, job: Any, job_id: int, worker_id: str,
          lease_seconds: float) -> bool:
    """Extend this worker's lease; False if the row is no longer this worker's."""
    res = db_session.execute(update(job).where(owned(job, job_id, worker_id)).values(
        lease_expires_at=datetime.now(UTC) + timedelta(seconds=lease_seconds)))
    return bool(res.rowcount)  # type: ignore[attr-defined]


def finish(*, db_session: Session, job: Any, job_id: int, worker_id: str,
           **values: Any) -> bool:
    """Mark the row done with `values` and end the lease; False if it was lost."""
    res = db_session.execute(update(job).where(owned(job, job_id, worker_id)).values(
        status=DONE, lease_owner=None, lease_expires_at=None, **values))
    return bool(res.rowcount)  # type: ignore[attr-defined]


def fail(*, db_session: Session, job: Any, job_id: int, worker_id: str, reason: str,
         max_attempts: int, final: dict[str, tuple[Any, Any]] | None = None) -> str | None:
    """An infrastructure failure: queue the row again, or fail it for good after its
    `max_attempts`-th attempt. `final` sets more columns: (if failed for good, else).
    Returns the new status (None if the lease was lost)."""
    last = job.attempts >= max_attempts
    final = {"finished_at": (datetime.now(UTC), None), **(final or {})}
    more = {name: case((last, then), else_=otherwise) for name, (then, otherwise) in final.items()}
    status = db_session.scalar(
        update(job).where(owned(job, job_id, worker_id))
        .values(failure_reason=reason[:MAX_REASON], lease_owner=None, lease_expires_at=None,
                status=case((last, FAILED), else_=QUEUED), **more)
        .returning(job.status))
    return str(status) if status is not None else None


def release(*, db_session: Session, job: Any, job_id: int, worker_id: str) -> None:
    """Give a claimed row back without counting an attempt (a worker shutting down)."""
    db_session.execute(update(job).where(owned(job, job_id, worker_id)).values(
        status=QUEUED, lease_owner=None, lease_expires_at=None, attempts=job.attempts - 1))
