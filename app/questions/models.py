"""Topics, questions and their immutable revisions."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.db import Base, utcnow

STATUS_DRAFT = "draft"
STATUS_PUBLISHED = "published"
STATUS_RETIRED = "retired"


class Topic(Base):
    __tablename__ = "topics"

    slug: Mapped[str] = mapped_column(String(80), primary_key=True)
    title: Mapped[str] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(Text, default="")
    position: Mapped[int] = mapped_column(default=100)
    group: Mapped[str] = mapped_column(String(80), default="", server_default="")
    # schema.TopicDoc.round: ddp, large-model, incident or design.
    round: Mapped[str] = mapped_column(String(16), default="ddp", server_default="ddp")


class Question(Base):
    """A stable slug whose content lives in revisions; the current one is what learners see."""

    __tablename__ = "questions"

    id: Mapped[int] = mapped_column(primary_key=True)
    slug: Mapped[str] = mapped_column(String(80), unique=True)
    status: Mapped[str] = mapped_column(String(16), default=STATUS_DRAFT)
    # Denormalised from the current revision so lists filter without parsing JSON.
    topic: Mapped[str] = mapped_column(ForeignKey("topics.slug"))
    title: Mapped[str] = mapped_column(String(200))
    difficulty: Mapped[int]
    type: Mapped[str] = mapped_column(String(16))
    tags: Mapped[list[Any]] = mapped_column(default=list)
    has_snippet: Mapped[bool] = mapped_column(default=False)
    current_revision_id: Mapped[int | None] = mapped_column(
        ForeignKey("question_revisions.id", use_alter=True, name="fk_questions_current_revision",
                   ondelete="SET NULL")
    )
    # The newest saved edit, not yet published; learners keep seeing the current revision.
    draft_revision_id: Mapped[int | None] = mapped_column(
        ForeignKey("question_revisions.id", use_alter=True, name="fk_questions_draft_revision",
                   ondelete="SET NULL")
    )
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)

    current_revision: Mapped[QuestionRevision | None] = relationship(
        foreign_keys=[current_revision_id], post_update=True, lazy="joined"
    )

    __table_args__ = (Index("ix_questions_topic_status", "topic", "status"),)


class QuestionRevision(Base):
    """One saved state of a question; never changed after it is written."""

    __tablename__ = "question_revisions"

    id: Mapped[int] = mapped_column(primary_key=True)
    question_id: Mapped[int] = mapped_column(ForeignKey("questions.id", ondelete="CASCADE"))
    number: Mapped[int]
    # The validated bank document (schema.QuestionDoc) as JSON, and its snippet.
    content: Mapped[dict[str, Any]]
    snippet_text: Mapped[str | None] = mapped_column(Text)
    content_hash: Mapped[str] = mapped_column(String(64))
    source: Mapped[str] = mapped_column(String(32), default="import")
    author_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"))
    note: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    __table_args__ = (UniqueConstraint("question_id", "number"),)
