"""Shapes of the problem-reports API (/api/v1)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field


class ReportIn(BaseModel):
    kind: Literal["wrong_key", "unclear", "verify", "other"]
    comment: str = Field(default="", max_length=2000)
    revision_id: int | None = Field(default=None, ge=1, le=2**31 - 1,
                                    description="The revision answered (a quiz's pinned one).")
    variant: int | None = Field(default=None, ge=0, le=1000,
                                description="The variant you saw (its numbers); default 0.")


class ReportOut(BaseModel):
    id: int
    question: str
    title: str
    revision_id: int
    variant: int
    kind: str
    comment: str
    status: Literal["open", "resolved", "declined"]
    note: str
    created_at: datetime
    handled_at: datetime | None
