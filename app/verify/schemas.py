"""Shapes of the verify JSON API."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from app.questions.schema import KnobValue


class VerifyIn(BaseModel):
    params: dict[str, KnobValue] = Field(
        default_factory=dict, description="Knob values; each must be one the question allows."
    )


class VerifyOut(BaseModel):
    run_id: int
    status: Literal["queued", "running", "done", "failed"]
    cached: bool
    url: str


class RunOut(BaseModel):
    run_id: int
    status: Literal["queued", "running", "done", "failed"]
    world_size: int
    params: dict[str, Any]
    torch_version: str
    requested_at: datetime
    claimed_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    attempts: int
    failure_reason: str | None = Field(
        None, description="Why the infrastructure could not run it (never torch's behaviour)."
    )
    result: dict[str, Any] | None = Field(None, description="The run result once done (docs/run-result.md).")


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
