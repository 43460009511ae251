"""Shapes of the item-statistics API (/api/v1/stats, authors only)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ChoicePicksOut(BaseModel):
    key: str
    text: str
    correct: bool | None = Field(description="None: right in some variants only.")
    picks: int
    share: float


class ConfidenceOut(BaseModel):
    confidence: str = Field(description="guessing, unsure, sure, or none (not given).")
    right: int
    wrong: int


class ItemOut(BaseModel):
    question: str
    title: str
    topic: str
    revision_id: int
    revision: int
    variant: int | None = Field(description="The variant (None until attempts record one).")
    attempts: int = Field(description="Learners whose first attempt was at this revision.")
    facility: float | None = Field(description="Share of those first attempts that were right.")
    discrimination: float | None = Field(
        description="Point-biserial correlation of right-on-this-item with the learner's share "
                    "right on their other first attempts.")
    rest_learners: int = Field(description="Learners with a rest score (3+ other first attempts).")
    median_ms: float | None
    choices: list[ChoicePicksOut]
    confidence: list[ConfidenceOut]
    flags: list[str] = Field(description="discrimination, unpicked, easy (30+ attempts only).")
