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
    variant: int | None = Field(
        default=None, ge=0, le=1000,
        description="Which variant to run (its values join the params; a `world_size` variable "
                    "sets the ranks); default: the one GET /api/v1/questions/{slug} shows you.")


class VerifyOut(BaseModel):
    run_id: int
    status: Literal["queued", "running", "done", "failed"]
    cached: bool
    url: str
    variant: int = Field(0, description="The variant run.")


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
