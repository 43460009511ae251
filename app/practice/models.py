"""Learners, quizzes, attempts, FSRS review cards and their logs, and problem reports."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, utcnow


class Learner(Base):
    """An identity from a signed cookie; an account may claim it later."""

    __tablename__ = "learners"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    # Set when a learner account claims this identity (sign-up); one learner per account.
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"), index=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


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


REPORT_KINDS = {
    "wrong_key": "The answer key is wrong",
    "unclear": "The wording is unclear",
    "verify": "The verify result looks wrong",
    "other": "Something else",
}
REPORT_OPEN = "open"
REPORT_RESOLVED = "resolved"
REPORT_DECLINED = "declined"
REPORT_STATUSES = (REPORT_OPEN, REPORT_RESOLVED, REPORT_DECLINED)


class ProblemReport(Base):
    """A learner's report of a problem with one revision of a question."""

    __tablename__ = "problem_reports"

    id: Mapped[int] = mapped_column(primary_key=True)
    learner_id: Mapped[str] = mapped_column(ForeignKey("learners.id"), index=True)
    question_id: Mapped[int] = mapped_column(ForeignKey("questions.id"))
    revision_id: Mapped[int] = mapped_column(ForeignKey("question_revisions.id"))
    kind: Mapped[str] = mapped_column(String(16))
    comment: Mapped[str] = mapped_column(Text, default="")
    status: Mapped[str] = mapped_column(String(16), default=REPORT_OPEN)
    note: Mapped[str] = mapped_column(Text, default="")
    handled_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    handled_at: Mapped[datetime | None]

    __table_args__ = (Index("ix_problem_reports_status_question", "status", "question_id"),)


class MockInterview(Base):
    """A timed mock interview: a quiz (kind "mock") with a server-held deadline and a report.

    The deadline is the server's: an answer that arrives after it is not stored, whatever the
    page says. `share_token` is a capability for the report's read-only share link; revoking
    it (setting it to None) makes the old link a 404.
    """

    __tablename__ = "mock_interviews"

    quiz_id: Mapped[str] = mapped_column(ForeignKey("quizzes.id", ondelete="CASCADE"),
                                         primary_key=True)
    learner_id: Mapped[str] = mapped_column(ForeignKey("learners.id"), index=True)
    minutes: Mapped[int]
    started_at: Mapped[datetime]
    deadline: Mapped[datetime]
    finished_at: Mapped[datetime | None]
    share_token: Mapped[str | None] = mapped_column(String(64), unique=True)


class LearnerGoal(Base):
    """The learner's interview date and the recall they want on it (the readiness forecast)."""

    __tablename__ = "learner_goals"

    learner_id: Mapped[str] = mapped_column(ForeignKey("learners.id"), primary_key=True)
    interview_date: Mapped[date | None]
    target: Mapped[float] = mapped_column(default=0.9)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
