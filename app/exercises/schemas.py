"""Shapes of the exercises API (/api/v1)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class ExerciseRunIn(BaseModel):
    code: str = Field(description="Your code (at most 20 KB of UTF-8); the exercise's checks run on it.")


class ExerciseRunOut(BaseModel):
    submission: str = Field(description="Names this Run's runs; poll `url` for its checks.")
    run_ids: list[int]
    status: Literal["pending", "done"]
    url: str


class CheckRunOut(BaseModel):
    params: dict[str, Any]
    world_size: int
    expected: str | None = Field(None, description="What this combination had to measure.")
    measured: str | None
    passed: bool | None


class VisibleCheckOut(BaseModel):
    label: str
    expected: str
    done: bool
    passed: bool
    runs: list[CheckRunOut]


class SubmissionOut(BaseModel):
    """A Run of an exercise: each visible check; hidden checks only as counts."""

    submission: str
    status: Literal["pending", "done"]
    passed: bool
    infrastructure_failed: bool
    visible: list[VisibleCheckOut]
    hidden_total: int
    hidden_passed: int
    run_ids: list[int]
    attempt_id: int | None = None
