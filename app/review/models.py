"""FSRS review cards, one per learner and question, and their review logs."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Index, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base


class ReviewCard(Base):
    """One FSRS card per learner and question (the `fsrs` package's Card.to_dict() as JSON).

    Keyed by question, not revision: a new revision of a question keeps its card.
    `due` is copied out of the JSON so the queue is one indexed range scan.
    """

    __tablename__ = "review_cards"

    id: Mapped[int] = mapped_column(primary_key=True)
    learner_id: Mapped[str] = mapped_column(ForeignKey("learners.id"))
    question_id: Mapped[int] = mapped_column(ForeignKey("questions.id"))
    card: Mapped[dict[str, Any]]
    due: Mapped[datetime] = mapped_column(index=True)
    reps: Mapped[int] = mapped_column(default=0, server_default="0")
    last_review: Mapped[datetime | None]

    __table_args__ = (
        UniqueConstraint("learner_id", "question_id"),
        Index("ix_review_cards_learner_due", "learner_id", "due"),
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
