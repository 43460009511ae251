"""Shapes of the dashboard API (/api/v1)."""

from __future__ import annotations

from datetime import date, datetime
from typing import Literal

from pydantic import BaseModel, Field


class TopicMasteryOut(BaseModel):
    slug: str
    title: str
    questions: int
    seen: int
    recall: float = Field(description="FSRS's mean predicted recall over the topic's questions "
                                      "(unseen counted as 0), 0..1.")


class WeekOut(BaseModel):
    week: date = Field(description="The Monday of the week.")
    attempts: int
    correct: int


class DueDayOut(BaseModel):
    day: date
    due: int = Field(description="Cards falling due that day (today includes the overdue).")


class ReportStatusOut(BaseModel):
    id: int
    question: str
    status: Literal["open", "resolved", "declined"]
    note: str


class ForecastTopicOut(TopicMasteryOut):
    planned: float | None = Field(
        description="Predicted recall at the interview if you follow the plan.")


class PlanDayOut(BaseModel):
    day: date
    reviews: int
    new: int


class ForecastOut(BaseModel):
    interview_date: date
    at: datetime = Field(description="The moment the forecast is for (09:00 UTC that day).")
    target: float
    topics: list[ForecastTopicOut]
    plan: list[PlanDayOut]


class DashboardOut(BaseModel):
    now: datetime
    mastery: list[TopicMasteryOut]
    weeks: list[WeekOut]
    days_practised: dict[str, int] = Field(description="Answers per day (ISO date).")
    due_next_7_days: list[DueDayOut]
    weakest: list[TopicMasteryOut]
    reports: list[ReportStatusOut]
    forecast: ForecastOut | None
