"""Shapes of the review-queue API (/api/v1)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field


class DueCardOut(BaseModel):
    slug: str
    title: str
    topic: str
    variant: int = Field(0, description="The variant to review: another than the one last "
                                        "answered, when there are several. Answer it with "
                                        "POST /api/v1/questions/{slug}/attempts and this variant.")
    prompt: str = Field("", description="That variant's prompt (GET /api/v1/questions/{slug}"
                                        "?variant=... gives its choices).")
    due: datetime
    reps: int
    retrievability: float = Field(description="FSRS's predicted recall now, 0..1.")


class ReviewQueueOut(BaseModel):
    due_count: int
    cards: list[DueCardOut]
    next_due: datetime | None = Field(description="When the next card falls due, if none is now.")


class RetentionIn(BaseModel):
    desired_retention: float = Field(ge=0.70, le=0.97, description="0.70 to 0.97.")


class FitOut(BaseModel):
    id: int
    reason: Literal["asked", "weekly"]
    status: Literal["queued", "running", "done", "failed"]
    outcome: Literal["fitted", "no_better", "too_few"] | None = Field(
        description="fitted: your own parameters are in use; no_better: they predicted your "
                    "reviews no better than the defaults, which stay; too_few: not enough reviews.")
    reviews: int | None
    eligible: int | None = Field(description="Reviews the fit learned from.")
    seconds: float | None
    requested_at: datetime
    finished_at: datetime | None


class WorkloadOut(BaseModel):
    retention: float
    per_day: list[float] = Field(description="Mean simulated reviews on each of the next 30 days.")
    total: float


class ScheduleOut(BaseModel):
    desired_retention: float
    own_parameters: bool = Field(description="True when your own fitted weights schedule you.")
    parameters: list[float] = Field(description="The 21 FSRS-6 weights in use.")
    fitted_at: datetime | None
    fitted_reviews: int | None
    fitted_loss: float | None
    default_loss: float | None
    optimal_retention: float | None = Field(
        description="The retention the fsrs Optimizer computes as optimal for you.")
    eligible_reviews: int = Field(description="Reviews a fit would learn from now.")
    reviews_needed: int
    pending_fit: FitOut | None
    last_fit: FitOut | None
    workload: list[WorkloadOut]
