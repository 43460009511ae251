"""A learner's interview date and target recall (the readiness forecast)."""

from __future__ import annotations

from datetime import date, datetime

from sqlalchemy import ForeignKey
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, utcnow


class LearnerGoal(Base):
    """The learner's interview date and the recall they want on it (the readiness forecast)."""

    __tablename__ = "learner_goals"

    learner_id: Mapped[str] = mapped_column(ForeignKey("learners.id"), primary_key=True)
    interview_date: Mapped[date | None]
    target: Mapped[float] = mapped_column(default=0.9)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
