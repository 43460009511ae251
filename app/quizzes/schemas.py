"""Shapes of the attempts API (/api/v1)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, StrictFloat, StrictInt, StrictStr

from app.questions.schemas import PartOut


class AttemptIn(BaseModel):
    # Strict: JSON true would otherwise be taken for the number 1.
    answer: StrictStr | list[StrictStr] | StrictInt | StrictFloat | dict[str, Any] = Field(
        description="A choice key, a list of choice keys (multi-select), or a number; for a "
                    "case, the answer to one part (with `part`); for a talk-through "
                    '{"text": ...} first, then {"ticked": [rubric move numbers]}.'
    )
    variant: int | None = Field(
        default=None, ge=0, le=1000,
        description="The variant answered: the one drawn for you now, as GET "
                    "/api/v1/questions/{slug} gives it (the default); another is refused with "
                    "409 naming the drawn one. The grade and key are that variant's.")
    part: int | None = Field(
        default=None, ge=0, le=100,
        description="A case's part this answers (0 first); parts are answered in order.")
    # At most a day; the column is a 32-bit integer.
    time_taken_ms: int | None = Field(default=None, ge=0, le=86_400_000)
    confidence: Literal["guessing", "unsure", "sure"] | None = Field(
        default=None, description="How sure the learner was; shapes the review schedule.")


class PartGradeOut(BaseModel):
    """One answered part of a case, graded against its own key."""

    part: int
    score: float
    correct: bool
    answer: Any
    correct_answer: Any
    explanation: str


class AttemptOut(BaseModel):
    attempt_id: int | None = Field(
        description="The stored attempt; None while a case or talk-through is under way.")
    variant: int = Field(0, description="The variant answered.")
    complete: bool = Field(True, description="False after a step that leaves a case or "
                                             "talk-through unfinished.")
    score: float | None
    correct: bool | None
    answer: Any
    correct_answer: Any
    explanation: str | None
    first_submission: bool = True
    part: PartGradeOut | None = Field(None, description="The case's part this step answered.")
    parts: list[PartGradeOut] = Field([], description="A finished case's parts, graded.")
    next_part: PartOut | None = Field(None, description="The case's next part, revealed now.")
    model_answer: str | None = Field(None, description="A talk-through's, once its text is in.")
    rubric: list[str] | None = Field(None, description="A talk-through's moves, to tick next.")
    ticked: list[int] | None = Field(None, description="The moves ticked (a finished talk-through).")
