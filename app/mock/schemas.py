"""Shapes of the mock-interview API (/api/v1)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, StrictFloat, StrictInt, StrictStr


class MockIn(BaseModel):
    minutes: int = Field(default=25, ge=10, le=45)


class MockItemOut(BaseModel):
    position: int
    slug: str
    title: str
    revision_id: int
    answered: bool


class MockOut(BaseModel):
    id: str
    minutes: int
    started_at: datetime
    deadline: datetime
    finished_at: datetime | None
    items: list[MockItemOut]


class MockAnswerIn(BaseModel):
    position: int = Field(ge=1, le=1000)
    answer: StrictStr | list[StrictStr] | StrictInt | StrictFloat
    confidence: Literal["guessing", "unsure", "sure"] | None = None


class MockAnswerOut(BaseModel):
    position: int
    accepted: bool
    seconds_left: int


class CalibrationOut(BaseModel):
    counts: dict[str, int]
    right: dict[str, int]
    sure_right: float | None = Field(description="How often 'sure' was right.")
    guessing_wrong: float | None = Field(description="How often 'guessing' was wrong.")


class MockReportItemOut(BaseModel):
    position: int
    slug: str
    title: str
    topic: str
    answered: bool
    score: float
    correct: bool
    time_taken_ms: int | None
    confidence: str | None
    answer: Any
    correct_answer: Any
    explanation: str | None = Field(description="Given for misses.")


class MockReportOut(BaseModel):
    id: str
    score: float
    total: int
    answered: int
    elapsed_ms: int
    started_at: datetime
    finished_at: datetime | None
    per_topic: dict[str, float]
    calibration: CalibrationOut
    items: list[MockReportItemOut]
