"""Shapes of the JSON API under /api/v1 for questions and attempts."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, StrictFloat, StrictInt, StrictStr

from app.questions.schema import BucketTrace, RankEventsTrace


class ChoiceOut(BaseModel):
    key: str
    text: str


class KnobOut(BaseModel):
    name: str
    label: str
    values: list[bool | int | float | str]
    default: bool | int | float | str


class QuestionSummaryOut(BaseModel):
    slug: str
    topic: str
    title: str
    difficulty: int
    type: str
    tags: list[str]
    has_snippet: bool
    url: str


class QuestionOut(QuestionSummaryOut):
    """A question as a learner sees it before answering: no answer key, no explanation."""

    revision: int
    answer_format: Literal["single", "multi", "numeric"]
    prompt: str
    choices: list[ChoiceOut] = []
    unit: str | None = None
    tolerance: str | None = None
    trace: RankEventsTrace | BucketTrace | None = None
    knobs: list[KnobOut] = []


class AttemptIn(BaseModel):
    # Strict: JSON true would otherwise be taken for the number 1.
    answer: StrictStr | list[StrictStr] | StrictInt | StrictFloat = Field(
        description="A choice key, a list of choice keys (multi-select), or a number."
    )
    # At most a day; the column is a 32-bit integer.
    time_taken_ms: int | None = Field(default=None, ge=0, le=86_400_000)


class AttemptOut(BaseModel):
    attempt_id: int
    score: float
    correct: bool
    answer: Any
    correct_answer: Any
    explanation: str
    first_submission: bool = True
