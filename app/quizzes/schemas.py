"""Shapes of the attempts API (/api/v1)."""

from __future__ import annotations

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
