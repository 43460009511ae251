"""Quizzes, their items pinned to a revision, and attempts (graded answers)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, utcnow


class Quiz(Base):
    __tablename__ = "quizzes"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    learner_id: Mapped[str] = mapped_column(ForeignKey("learners.id"), index=True)
    kind: Mapped[str] = mapped_column(String(16), default="practice")
    topics: Mapped[list[Any]] = mapped_column(default=list)
    difficulty: Mapped[int | None]
    started_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None]


class QuizItem(Base):
    """A question in a quiz, pinned to the revision the learner started with."""

    __tablename__ = "quiz_items"

    id: Mapped[int] = mapped_column(primary_key=True)
    quiz_id: Mapped[str] = mapped_column(ForeignKey("quizzes.id", ondelete="CASCADE"))
    position: Mapped[int]
    question_id: Mapped[int] = mapped_column(ForeignKey("questions.id"))
    revision_id: Mapped[int] = mapped_column(ForeignKey("question_revisions.id"))
    shown_at: Mapped[datetime | None]

    __table_args__ = (UniqueConstraint("quiz_id", "position"),)


class Attempt(Base):
    """One graded answer. Within a quiz only the first answer to an item counts."""

    __tablename__ = "attempts"

    id: Mapped[int] = mapped_column(primary_key=True)
    learner_id: Mapped[str] = mapped_column(ForeignKey("learners.id"), index=True)
    question_id: Mapped[int] = mapped_column(ForeignKey("questions.id"))
    revision_id: Mapped[int] = mapped_column(ForeignKey("question_revisions.id"))
    quiz_item_id: Mapped[int | None] = mapped_column(
        ForeignKey("quiz_items.id", ondelete="CASCADE"), unique=True
    )
    # A form's one-time token (or an API Idempotency-Key): a replay of the same
    # submission finds the first attempt instead of storing a second.
    token: Mapped[str | None] = mapped_column(String(64), unique=True)
    answer: Mapped[Any] = mapped_column(JSON)
    score: Mapped[float]
    correct: Mapped[bool]
    time_taken_ms: Mapped[int | None]
    # The learner's own "guessing" / "unsure" / "sure", if they gave one (CONFIDENCE_LEVELS).
    confidence: Mapped[str | None] = mapped_column(String(8))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    __table_args__ = (Index("ix_attempts_learner_question", "learner_id", "question_id"),)


CONFIDENCE_LEVELS = ("guessing", "unsure", "sure")
