"""Shapes of the review-queue API (/api/v1)."""

from __future__ import annotations

from datetime import datetime

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
