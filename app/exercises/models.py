"""A learner's finished submissions of an exercise: how many failed opens the solution."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, utcnow


class ExerciseSubmission(Base):
    """One Run of an exercise, once all its runs finished: passed or not. A "give up" is a
    row too (`gave_up`), with no runs."""

    __tablename__ = "exercise_submissions"

    id: Mapped[int] = mapped_column(primary_key=True)
    learner_id: Mapped[str] = mapped_column(ForeignKey("learners.id"))
    question_id: Mapped[int] = mapped_column(ForeignKey("questions.id"))
    # The submission's runs ("12-13"), or "gave-up:<uuid>": recorded once each.
    token: Mapped[str] = mapped_column(String(200), unique=True)
    passed: Mapped[bool]
    gave_up: Mapped[bool] = mapped_column(default=False)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    __table_args__ = (Index("ix_exercise_submissions_learner_question", "learner_id", "question_id"),)
