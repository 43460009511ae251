"""Shapes of the mock-interview API (/api/v1)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, StrictFloat, StrictInt, StrictStr

from app.questions.schemas import AskedOut, PartOut


class MockIn(BaseModel):
    minutes: int = Field(default=25, ge=10, le=45)


class MockItemOut(BaseModel):
    position: int
    slug: str
    title: str
    revision_id: int
    answered: bool
    variant: int = Field(0, description="The variant this interview asks (pinned at its start).")
    asked: AskedOut | None = Field(None, description="The question as this interview asks it: "
                                                     "the variant's prompt and choices (a case's "
                                                     "parts revealed so far); absent once answered.")


class MockOut(BaseModel):
    id: str
    minutes: int
    started_at: datetime
    deadline: datetime
    finished_at: datetime | None
    items: list[MockItemOut]


class MockAnswerIn(BaseModel):
    position: int = Field(ge=1, le=1000)
    answer: StrictStr | list[StrictStr] | StrictInt | StrictFloat | dict[str, Any] = Field(
        description="As for POST /api/v1/questions/{slug}/attempts: a case part by part (with "
                    '`part`), a talk-through as {"text": ...} then {"ticked": [...]}.')
    part: int | None = Field(default=None, ge=0, le=100, description="A case's part (0 first).")
    confidence: Literal["guessing", "unsure", "sure"] | None = None


class MockAnswerOut(BaseModel):
    position: int
    accepted: bool
    seconds_left: int
    complete: bool = Field(True, description="False while the question (a case, a talk-through) "
                                             "has steps to go.")
    next_part: PartOut | None = Field(None, description="A case's next part, revealed now "
                                                        "(no grade before the interview ends).")
    model_answer: str | None = Field(None, description="A talk-through's, once its text is in.")
    rubric: list[str] | None = Field(None, description="A talk-through's moves, to tick next.")


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
    variant: int = 0
    answered: bool
    score: float | None = Field(description="None while withheld.")
    correct: bool | None = Field(description="None while withheld.")
    time_taken_ms: int | None
    confidence: str | None
    answer: Any
    correct_answer: Any = Field(description="None while withheld.")
    explanation: str | None = Field(description="Given for misses, unless withheld.")
    withheld: str | None = Field(
        None, description="Why the key, the explanation and the grade are withheld, when they "
                          "are: a question not answered (that variant), or one of your mock "
                          "interview under way.")


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
