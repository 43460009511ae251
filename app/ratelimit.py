"""The one rate limiter: `hit(bucket, key, limit, window)` over one table, for every limit the
app keeps (fresh Verify runs, runs of learners' code, authors' runs, sign-ins, sign-ups,
problem reports), and `spend(kind, learner, address)` for a learner's writes (quizzes and mock
interviews started, answers, reports), each bounded per learner identity and, more loosely,
per address: a cookie is free to drop, a classroom shares one address.

A hit is a row, so a limit holds across web processes and restarts. Hits of one
(bucket, key) take turns — on SQLite under the write lock every writing transaction holds
from its start, on PostgreSQL under a transaction-scoped advisory lock — so a burst of
concurrent requests cannot all count before any is recorded. A refused request records
nothing: waiting, not hammering, is what frees a slot.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Index, String, Table, bindparam, delete, func, insert, select
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


_HITS: Table = RateHit.__table__  # type: ignore[assignment]
# One hit in this many, on average, also drops its bucket's hits older than the window.
SWEEP_EVERY = 64
# The three statements, built once (they run on every answer).
_COUNT = select(func.count(), func.min(_HITS.c.at)).where(
    _HITS.c.bucket == bindparam("bucket"), _HITS.c.key == bindparam("key"),
    _HITS.c.at >= bindparam("since"))
_ADD = insert(_HITS).returning(_HITS.c.id)
_SWEEP = delete(_HITS).where(_HITS.c.bucket == bindparam("bucket"), _HITS.c.at < bindparam("since"))


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
        message: str, cost: int = 1, now: datetime | None = None) -> int:
    """Count `cost` hits for (bucket, key); RateLimited, counting nothing, if that would make
    more than `limit` in the last `window_s` seconds. Returns the id of the (last) hit.

    Two Core statements on the request's connection, a count and an insert: this runs on
    every answer, and the ORM's unit of work cost more than the rest of the answer."""
    now = now or utcnow()
    key = key[:MAX_KEY_CHARS]
    since = now - timedelta(seconds=window_s)
    _serialize(db_session, bucket, key)
    connection = db_session.connection()
    # One read decides: a client past its limit (a flood) costs one indexed count, no write.
    n, oldest = connection.execute(_COUNT, {"bucket": bucket, "key": key, "since": since}).one()
    if int(n or 0) + cost > limit:
        raise RateLimited(message, retry_after_s=_retry_after(oldest, window_s, now))
    last = 0
    for _ in range(cost):
        last = int(connection.execute(_ADD, {"bucket": bucket, "key": key, "at": now}).scalar_one())
    if random.random() < cost / SWEEP_EVERY:
        # Hits older than any window of this bucket are dead weight, dropped now and then
        # (at random: a bucket whose hits always come second, as an address's after its
        # learner's, would never see a row id that is a multiple of anything).
        connection.execute(_SWEEP, {"bucket": bucket, "since": since})
    return last


def _retry_after(oldest: datetime | None, window_s: float, now: datetime) -> int:
    """Seconds until the oldest hit in the window leaves it (and frees a slot), at least 1."""
    if oldest is None:
        return max(1, math.ceil(window_s))
    if oldest.tzinfo is None:  # SQLite hands times back naive (they are UTC)
        oldest = oldest.replace(tzinfo=now.tzinfo)
    left = (oldest + timedelta(seconds=window_s) - now).total_seconds()
    return max(1, min(math.ceil(left), math.ceil(window_s)))


@dataclass(frozen=True)
class LearnerWrites:
    """One kind of a learner's writes, bounded per learner identity and per client address."""

    bucket: str
    what: str  # "quizzes started": what the refusal counts
    per_learner: int
    per_address: int
    window_s: float


# A learner practising hard starts a quiz every minute or two; a script starts hundreds.
QUIZZES = LearnerWrites("quiz", "quizzes started", 30, 120, 600)
# A mock interview lasts 10 to 45 minutes: a few an hour is plenty, a class behind one address
# more.
MOCKS = LearnerWrites("mock", "mock interviews started", 6, 60, 3600)
# Every answer and every step of a case or talk-through: a fast learner answers a few a
# minute; a classroom of 30 behind one address answers at most a few hundred.
ANSWERS = LearnerWrites("answer", "answers", 120, 600, 60)


def _window_words(window_s: float) -> str:
    minutes = round(window_s / 60)
    return "minute" if minutes <= 1 else ("hour" if minutes == 60 else f"{minutes} minutes")


def spend(*, db_session: Session, kind: LearnerWrites, learner_id: str, client_ip: str | None,
          now: datetime | None = None) -> None:
    """Count one write of this kind for the learner and their address; RateLimited (429 with
    Retry-After), counting nothing, past either bound. No address (a command, a test, work
    the app does for the learner) counts nothing."""
    if client_ip is None:
        return
    window = _window_words(kind.window_s)
    hit(db_session=db_session, bucket=kind.bucket, key=learner_id, limit=kind.per_learner,
        window_s=kind.window_s, now=now,
        message=f"Too many {kind.what} in the last {window} (at most {kind.per_learner}); "
                "wait a moment, then try again.")
    hit(db_session=db_session, bucket=f"{kind.bucket}-ip", key=client_ip, limit=kind.per_address,
        window_s=kind.window_s, now=now,
        message=f"Too many {kind.what} from your network in the last {window} (at most "
                f"{kind.per_address}); wait a moment, then try again.")


def forgive(*, db_session: Session, hit_id: int) -> None:
    """Take back one hit (a sign-in that turned out to be right counts no failure)."""
    db_session.connection().execute(delete(_HITS).where(_HITS.c.id == hit_id))


def forget(*, db_session: Session, bucket: str, key: str) -> None:
    """Drop every hit of (bucket, key): an account deleted leaves no trace behind."""
    db_session.execute(delete(RateHit).where(RateHit.bucket == bucket,
                                             RateHit.key == key[:MAX_KEY_CHARS]))
