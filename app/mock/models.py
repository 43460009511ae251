"""Timed mock interviews."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base


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
