"""Accounts (learners, authors, admins), failed sign-ins and the audit log."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, utcnow

ROLE_LEARNER = "learner"
ROLE_AUTHOR = "author"
ROLE_ADMIN = "admin"
# Runs classes (app/classes/): a role of its own, neither an author nor a learner account.
# One role per account keeps every check one comparison; someone who also writes questions
# has an author account besides (docs/classes.md).
ROLE_INSTRUCTOR = "instructor"
ROLES = (ROLE_LEARNER, ROLE_AUTHOR, ROLE_ADMIN, ROLE_INSTRUCTOR)
# The roles that may reach /author (and, for admins, /admin); a learner account never does.
STAFF_ROLES = (ROLE_AUTHOR, ROLE_ADMIN)


class User(Base):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(primary_key=True)
    username: Mapped[str] = mapped_column(String(64), unique=True)
    password_hash: Mapped[str] = mapped_column(String(255))
    role: Mapped[str] = mapped_column(String(16), default=ROLE_AUTHOR)
    active: Mapped[bool] = mapped_column(default=True)
    # Part of every session cookie; bumping it signs the user out everywhere
    # (logout, deactivation, a role change).
    session_version: Mapped[int] = mapped_column(default=0, server_default="0")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    @property
    def is_admin(self) -> bool:
        return self.role == ROLE_ADMIN

    @property
    def is_staff(self) -> bool:
        return self.role in STAFF_ROLES

    @property
    def is_learner(self) -> bool:
        return self.role == ROLE_LEARNER

    @property
    def is_instructor(self) -> bool:
        return self.role == ROLE_INSTRUCTOR


class AuditEntry(Base):
    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"))
    actor: Mapped[str] = mapped_column(String(64))
    action: Mapped[str] = mapped_column(String(64))
    target: Mapped[str] = mapped_column(String(200), default="")
    detail: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow, index=True)


class Learner(Base):
    """An identity from a signed cookie; an account may claim it later."""

    __tablename__ = "learners"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    # Set when a learner account claims this identity (sign-up); one learner per account.
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"), index=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
