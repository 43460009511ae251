"""Learners' reports of problems with a question, and what authors did with them."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, utcnow

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
    # The variant the learner saw (0 for a question without variables).
    variant: Mapped[int] = mapped_column(default=0, server_default="0")
    kind: Mapped[str] = mapped_column(String(16))
    comment: Mapped[str] = mapped_column(Text, default="")
    status: Mapped[str] = mapped_column(String(16), default=REPORT_OPEN)
    note: Mapped[str] = mapped_column(Text, default="")
    handled_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    handled_at: Mapped[datetime | None]

    __table_args__ = (Index("ix_problem_reports_status_question", "status", "question_id"),)
