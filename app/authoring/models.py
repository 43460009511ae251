"""Bank uploads waiting for an admin to confirm their import."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, utcnow


class BankUpload(Base):
    """An uploaded bank waiting for an admin to confirm its import.

    Kept in the database, not on local disk, so the confirming request may land on
    any web process.
    """

    __tablename__ = "bank_uploads"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    filename: Mapped[str] = mapped_column(String(200))
    # A normalised zip of the bank files (question YAML, topic files, snippets).
    data: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
