"""Verify runs (the job queue and the result cache) and per-revision audit verdicts."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, utcnow
from app.leases import DONE, FAILED, QUEUED, RUNNING

# A run is a job with a lease (app/leases.py).
RUN_QUEUED, RUN_RUNNING, RUN_DONE, RUN_FAILED = QUEUED, RUNNING, DONE, FAILED

# Queue priorities, claimed lowest first. A learner's own exercise code is never shared
# or cached for anyone else, so it waits behind every run an author or a cache needs.
PRIORITY_SHARED = 0
PRIORITY_PRIVATE = 1


class Run(Base):
    """One execution of a snippet for one cache key; the row is both job and cached answer."""

    __tablename__ = "runs"

    id: Mapped[int] = mapped_column(primary_key=True)
    cache_key: Mapped[str] = mapped_column(String(64))
    # True for the run that answers its key; NULL once superseded by a fresh run.
    # NULLs are distinct in unique constraints, so only one live run per key.
    live: Mapped[bool | None] = mapped_column(default=True)
    question_revision_id: Mapped[int | None] = mapped_column(
        ForeignKey("question_revisions.id", ondelete="SET NULL")
    )
    snippet_hash: Mapped[str] = mapped_column(String(64))
    snippet_text: Mapped[str] = mapped_column(Text)
    world_size: Mapped[int]
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    timeout_s: Mapped[float]
    torch_version: Mapped[str] = mapped_column(String(40))
    harness_version: Mapped[str] = mapped_column(String(40))
    requested_by: Mapped[str | None] = mapped_column(String(64))
    # The client address, for the per-address limit on fresh runs.
    requested_ip: Mapped[str | None] = mapped_column(String(64))
    # Whose share of the private lane a run is (queue.claim_run): a signed-in class member's
    # own account ("account:<learner>"); None for everyone else, whose share is the address.
    share_key: Mapped[str | None] = mapped_column(String(200))
    priority: Mapped[int] = mapped_column(default=PRIORITY_SHARED, server_default="0")

    status: Mapped[str] = mapped_column(String(16), default=RUN_QUEUED)
    attempts: Mapped[int] = mapped_column(default=0)
    lease_owner: Mapped[str | None] = mapped_column(String(100))
    lease_expires_at: Mapped[datetime | None]
    failure_reason: Mapped[str | None] = mapped_column(Text)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON)

    requested_at: Mapped[datetime] = mapped_column(default=utcnow)
    claimed_at: Mapped[datetime | None]
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]

    __table_args__ = (
        UniqueConstraint("cache_key", "live"),
        Index("ix_runs_status_requested", "status", "requested_at"),
        Index("ix_runs_requested_by", "requested_by", "requested_at"),
        Index("ix_runs_requested_ip", "requested_ip", "requested_at"),
    )


class Verdict(Base):
    """Whether a revision's answer key agreed with torch when its expectations were run."""

    __tablename__ = "verdicts"

    id: Mapped[int] = mapped_column(primary_key=True)
    revision_id: Mapped[int] = mapped_column(
        ForeignKey("question_revisions.id", ondelete="CASCADE"), index=True
    )
    torch_version: Mapped[str] = mapped_column(String(40))
    passed: Mapped[bool]
    checks: Mapped[list[Any]] = mapped_column(JSON, default=list)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
