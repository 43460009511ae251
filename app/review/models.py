"""FSRS review cards, one per learner and question, and their review logs."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Computed, Float, ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import Mapped, mapped_column
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

from app.db import Base, utcnow
from app.leases import DONE, FAILED, QUEUED, RUNNING

# A fit is a job with a lease (app/leases.py), as a verify run is.
FIT_QUEUED, FIT_RUNNING, FIT_DONE, FIT_FAILED = QUEUED, RUNNING, DONE, FAILED
# Why a fit was queued: the learner pressed the button, or the weekly refit found new reviews.
FIT_ASKED = "asked"
FIT_WEEKLY = "weekly"
# What a finished fit did: stored the learner's own parameters, kept the defaults because the
# fitted ones predicted the learner's own log no better, or found too few reviews to fit.
OUTCOME_FITTED = "fitted"
OUTCOME_NO_BETTER = "no_better"
OUTCOME_TOO_FEW = "too_few"


class CardStability(FunctionElement[float]):
    """The FSRS stability in a review card's JSON, as the database reads it: what the
    `stability` column is generated from (SQL_OF_STABILITY, per dialect)."""

    type = Float()
    inherit_cache = True


# The expression each database generates review_cards.stability from; the migration that
# added the column (classes_0011) spells the same text.
SQL_OF_STABILITY = {
    "sqlite": "json_extract(card, '$.stability')",
    "postgresql": "CAST((card ->> 'stability') AS DOUBLE PRECISION)",
}


@compiles(CardStability, "sqlite")
@compiles(CardStability, "postgresql")
def _stability_sql(_element: CardStability, compiler: SQLCompiler, **_kw: Any) -> str:
    return SQL_OF_STABILITY[compiler.dialect.name]


class ReviewCard(Base):
    """One FSRS card per learner and question (the `fsrs` package's Card.to_dict() as JSON).

    Keyed by question, not revision: a new revision of a question keeps its card.
    `due` is copied out of the JSON so the queue is one indexed range scan. `stability` is
    generated from the JSON by the database (virtual on SQLite, stored on PostgreSQL), so it
    can never disagree with it; with `last_review` it is indexed per learner and question,
    so a class's mastery is summed from the index alone, no card's JSON parsed.
    `last_rating` is the rating of the card's last
    review, written with the schedule it made (record_review): mastery counts a card only
    if that review recalled it, and reads it here rather than searching the card's log.
    """

    __tablename__ = "review_cards"

    id: Mapped[int] = mapped_column(primary_key=True)
    learner_id: Mapped[str] = mapped_column(ForeignKey("learners.id"))
    question_id: Mapped[int] = mapped_column(ForeignKey("questions.id"))
    card: Mapped[dict[str, Any]]
    due: Mapped[datetime] = mapped_column(index=True)
    reps: Mapped[int] = mapped_column(default=0, server_default="0")
    last_review: Mapped[datetime | None]
    stability: Mapped[float | None] = mapped_column(Computed(CardStability()))
    last_rating: Mapped[int | None]

    __table_args__ = (
        UniqueConstraint("learner_id", "question_id"),
        Index("ix_review_cards_learner_due", "learner_id", "due"),
        Index("ix_review_cards_learner_recall", "learner_id", "last_review", "question_id",
              "stability", "last_rating"),
    )


class ReviewLog(Base):
    """One FSRS review of a card (the `fsrs` package's ReviewLog.to_dict() as JSON)."""

    __tablename__ = "review_logs"

    id: Mapped[int] = mapped_column(primary_key=True)
    card_id: Mapped[int] = mapped_column(ForeignKey("review_cards.id", ondelete="CASCADE"),
                                         index=True)
    learner_id: Mapped[str] = mapped_column(ForeignKey("learners.id"), index=True)
    attempt_id: Mapped[int | None] = mapped_column(ForeignKey("attempts.id", ondelete="SET NULL"))
    rating: Mapped[int]
    reviewed_at: Mapped[datetime]
    log: Mapped[dict[str, Any]]


class LearnerSchedule(Base):
    """A learner's desired retention and, once fitted, their own FSRS parameters.

    No row (or `parameters` NULL) means FSRS's default weights at the default retention.
    """

    __tablename__ = "learner_schedules"

    learner_id: Mapped[str] = mapped_column(ForeignKey("learners.id"), primary_key=True)
    desired_retention: Mapped[float] = mapped_column(default=0.9)
    # The 21 FSRS-6 weights the Optimizer fitted, or NULL for the defaults.
    parameters: Mapped[list[Any] | None]
    fitted_at: Mapped[datetime | None]
    # Review-log rows the fit read.
    fitted_reviews: Mapped[int | None]
    # Mean log loss of the learner's own log under the fitted and under the default weights:
    # the fit is kept only when the first is lower.
    fitted_loss: Mapped[float | None]
    default_loss: Mapped[float | None]
    # The retention the package's Optimizer computes as cheapest per card remembered.
    optimal_retention: Mapped[float | None]
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class ScheduleFit(Base):
    """One fit of a learner's FSRS parameters: a job claimed with a lease, like a verify run."""

    __tablename__ = "schedule_fits"

    id: Mapped[int] = mapped_column(primary_key=True)
    learner_id: Mapped[str] = mapped_column(ForeignKey("learners.id", ondelete="CASCADE"))
    # True while queued or running, NULL after: NULLs are distinct in a unique constraint,
    # so a learner has at most one fit waiting, however often the button is pressed.
    pending: Mapped[bool | None] = mapped_column(default=True)
    reason: Mapped[str] = mapped_column(String(16), default=FIT_ASKED)
    status: Mapped[str] = mapped_column(String(16), default=FIT_QUEUED)
    attempts: Mapped[int] = mapped_column(default=0)
    lease_owner: Mapped[str | None] = mapped_column(String(100))
    lease_expires_at: Mapped[datetime | None]
    failure_reason: Mapped[str | None] = mapped_column(Text)
    outcome: Mapped[str | None] = mapped_column(String(16))
    reviews: Mapped[int | None]
    # Reviews the Optimizer learns from (a day or more after the card's previous review).
    eligible: Mapped[int | None]
    seconds: Mapped[float | None]
    requested_at: Mapped[datetime] = mapped_column(default=utcnow)
    claimed_at: Mapped[datetime | None]
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]

    __table_args__ = (
        UniqueConstraint("learner_id", "pending"),
        Index("ix_schedule_fits_status_requested", "status", "requested_at"),
        Index("ix_schedule_fits_learner_requested", "learner_id", "requested_at"),
    )
