"""Shapes of the JSON API under /api/v1 for questions and attempts."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from app.questions.schema import BucketTrace, KnobValue, RankEventsTrace


class ChoiceOut(BaseModel):
    key: str
    text: str


class KnobOut(BaseModel):
    name: str
    label: str
    values: list[KnobValue]
    default: KnobValue


class ExerciseOut(BaseModel):
    """An exercise as the learner sees it: never its solution, harness or hidden checks."""

    starter: str
    hints: list[str]
    visible_checks: list[str]
    hidden_checks: int
    run_url: str


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
    answer_format: Literal["single", "multi", "numeric", "exercise"]
    prompt: str
    choices: list[ChoiceOut] = []
    unit: str | None = None
    tolerance: str | None = None
    trace: RankEventsTrace | BucketTrace | None = None
    knobs: list[KnobOut] = []
    exercise: ExerciseOut | None = None


