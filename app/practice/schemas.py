"""Shapes of the attempts API (/api/v1)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, StrictFloat, StrictInt, StrictStr


class AttemptIn(BaseModel):
    # Strict: JSON true would otherwise be taken for the number 1.
    answer: StrictStr | list[StrictStr] | StrictInt | StrictFloat = Field(
        description="A choice key, a list of choice keys (multi-select), or a number."
    )
    # At most a day; the column is a 32-bit integer.
    time_taken_ms: int | None = Field(default=None, ge=0, le=86_400_000)
    confidence: Literal["guessing", "unsure", "sure"] | None = Field(
        default=None, description="How sure the learner was; shapes the review schedule.")


class AttemptOut(BaseModel):
    attempt_id: int
    score: float
    correct: bool
    answer: Any
    correct_answer: Any
    explanation: str
    first_submission: bool = True


class DueCardOut(BaseModel):
    slug: str
    title: str
    topic: str
    due: datetime
    reps: int
    retrievability: float = Field(description="FSRS's predicted recall now, 0..1.")


class ReviewQueueOut(BaseModel):
    due_count: int
    cards: list[DueCardOut]
    next_due: datetime | None = Field(description="When the next card falls due, if none is now.")


class ReportIn(BaseModel):
    kind: Literal["wrong_key", "unclear", "verify", "other"]
    comment: str = Field(default="", max_length=2000)
    revision_id: int | None = Field(default=None, ge=1, le=2**31 - 1,
                                    description="The revision answered (a quiz's pinned one).")


class ReportOut(BaseModel):
    id: int
    question: str
    title: str
    revision_id: int
    kind: str
    comment: str
    status: Literal["open", "resolved", "declined"]
    note: str
    created_at: datetime
    handled_at: datetime | None
