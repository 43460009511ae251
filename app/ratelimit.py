"""The one rate limiter: `hit(bucket, key, limit, window)` over one table, for every limit the
app keeps (fresh Verify runs, runs of learners' code, authors' runs, sign-ins, sign-ups,
problem reports).

A hit is a row, so a limit holds across web processes and restarts. Hits of one
(bucket, key) take turns — on SQLite under the write lock every writing transaction holds
from its start, on PostgreSQL under a transaction-scoped advisory lock — so a burst of
concurrent requests cannot all count before any is recorded. A refused request records
nothing: waiting, not hammering, is what frees a slot.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import Index, String, delete, func, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from app.db import Base, utcnow
from app.errors import RateLimited

# A key (a learner id, an address, "user:address") is cut to this many characters.
MAX_KEY_CHARS = 160


class RateHit(Base):
    """One counted request of some kind (`bucket`) by someone (`key`)."""

    __tablename__ = "rate_hits"

    id: Mapped[int] = mapped_column(primary_key=True)
    bucket: Mapped[str] = mapped_column(String(32))
    key: Mapped[str] = mapped_column(String(MAX_KEY_CHARS))
    at: Mapped[datetime] = mapped_column(default=utcnow)

    __table_args__ = (
        Index("ix_rate_hits_bucket_key_at", "bucket", "key", "at"),
        Index("ix_rate_hits_bucket_at", "bucket", "at"),
    )


def _serialize(db_session: Session, bucket: str, key: str) -> None:
    if db_session.get_bind().dialect.name == "postgresql":
        db_session.execute(select(func.pg_advisory_xact_lock(func.hashtext(f"{bucket}:{key}"))))


def used(*, db_session: Session, bucket: str, key: str, window_s: float,
         now: datetime | None = None) -> int:
    """How many hits (bucket, key) has in the last `window_s` seconds."""
    since = (now or utcnow()) - timedelta(seconds=window_s)
    return int(db_session.scalar(
        select(func.count()).select_from(RateHit).where(
            RateHit.bucket == bucket, RateHit.key == key[:MAX_KEY_CHARS], RateHit.at >= since)) or 0)


def hit(*, db_session: Session, bucket: str, key: str, limit: int, window_s: float,
        message: str, cost: int = 1, now: datetime | None = None) -> RateHit:
    """Count `cost` hits for (bucket, key); RateLimited, counting nothing, if that would make
    more than `limit` in the last `window_s` seconds. Returns the (last) hit recorded."""
    now = now or utcnow()
    key = key[:MAX_KEY_CHARS]
    _serialize(db_session, bucket, key)
    # Hits older than any window of this bucket are dead weight: dropped as we go.
    db_session.execute(delete(RateHit).where(RateHit.bucket == bucket,
                                             RateHit.at < now - timedelta(seconds=window_s)))
    if used(db_session=db_session, bucket=bucket, key=key, window_s=window_s, now=now) + cost > limit:
        raise RateLimited(message, retry_after_s=max(1, int(window_s)))
    rows = [RateHit(bucket=bucket, key=key, at=now) for _ in range(cost)]
    db_session.add_all(rows)
    db_session.flush()
    return rows[-1]


def forgive(*, db_session: Session, hit_row: RateHit) -> None:
    """Take back one hit (a sign-in that turned out to be right counts no failure)."""
    db_session.execute(delete(RateHit).where(RateHit.id == hit_row.id))


def forget(*, db_session: Session, bucket: str, key: str) -> None:
    """Drop every hit of (bucket, key): an account deleted leaves no trace behind."""
    db_session.execute(delete(RateHit).where(RateHit.bucket == bucket,
                                             RateHit.key == key[:MAX_KEY_CHARS]))
