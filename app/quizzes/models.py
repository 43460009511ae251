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
    # The variant the quiz asks, drawn when it started (0 for a question without variables).
    variant: Mapped[int] = mapped_column(default=0, server_default="0")
    shown_at: Mapped[datetime | None]

    __table_args__ = (UniqueConstraint("quiz_id", "position"),)


class Attempt(Base):
    """One graded answer. Within a quiz only the first answer to an item counts."""

    __tablename__ = "attempts"

    id: Mapped[int] = mapped_column(primary_key=True)
    learner_id: Mapped[str] = mapped_column(ForeignKey("learners.id"), index=True)
    question_id: Mapped[int] = mapped_column(ForeignKey("questions.id"))
    revision_id: Mapped[int] = mapped_column(ForeignKey("question_revisions.id"))
    # The variant answered: the revision and this index render the question the learner saw,
    # so the grade and the key shown later are that variant's even after the question changes.
    variant: Mapped[int] = mapped_column(default=0, server_default="0")
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
    # When an anonymous identity's answer was moved into a learner account at sign-up or
    # sign-in (app.learners.service.move_history): the learner's history, never a class's work
    # (signed out, one could answer in several anonymous windows and sign in from the best).
    claimed_at: Mapped[datetime | None] = mapped_column(default=None)

    # Beyond (learner, question), what a class page reads of each attempt it finds (when,
    # which variant, the score, whether a live mock interview or a claim holds it back), so
    # its thousands of lookups read no attempt's row (app.classes.class_page._question_work;
    # migrations classes_0011, doors_0015).
    __table_args__ = (Index("ix_attempts_learner_question_time", "learner_id", "question_id",
                            "created_at", "variant", "score", "quiz_item_id", "claimed_at"),)


CONFIDENCE_LEVELS = ("guessing", "unsure", "sure")

# The slot of an answer in steps given outside a quiz (the question page, Review, the API).
SLOT_STANDALONE = "standalone"


class PartialAnswer(Base):
    """An answer given in steps, not yet complete: a case's parts answered so far, or a
    talk-through's written text before its rubric is ticked.

    The server keeps it so that the order holds whatever the client sends: part 2 is
    refused before part 1, and neither a later part's text nor the model answer is sent
    before its turn. When the last step arrives it becomes an Attempt and this row goes.
    One per learner and question (app.quizzes.service.partial_answer finds it whatever the
    slot); `slot` is where it was begun (a quiz item, or SLOT_STANDALONE).
    """

    __tablename__ = "partial_answers"

    id: Mapped[int] = mapped_column(primary_key=True)
    learner_id: Mapped[str] = mapped_column(ForeignKey("learners.id"), index=True)
    question_id: Mapped[int] = mapped_column(ForeignKey("questions.id"))
    # The revision and variant the first step answered: later steps answer the same ones.
    revision_id: Mapped[int] = mapped_column(ForeignKey("question_revisions.id"))
    variant: Mapped[int] = mapped_column(default=0)
    slot: Mapped[str] = mapped_column(String(32))
    quiz_item_id: Mapped[int | None] = mapped_column(
        ForeignKey("quiz_items.id", ondelete="CASCADE"))
    # {"parts": [normalised answer, ...]} for a case, {"text": "..."} for a talk-through.
    state: Mapped[dict[str, Any]]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)

    __table_args__ = (UniqueConstraint("learner_id", "question_id", "slot"),)
