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
    recall: float = Field(description="Mastery, 0..1: the mean over the topic's questions of "
                                      "FSRS's predicted recall where the last answer was "
                                      "recalled (0 after a miss, and for unseen questions).")


class WeekOut(BaseModel):
    week: date = Field(description="The Monday of the week.")
    attempts: int
    correct: int


class DueDayOut(BaseModel):
    day: date
    due: int = Field(description="Cards falling due that day after now (today: later today; "
                                 "the cards due now are `due_now`).")


class TodayOut(BaseModel):
    due_now: int = Field(description="Cards due now: what the Review page serves and the "
                                     "header counts.")
    later_today: int = Field(description="Cards falling due later today (UTC), not due yet.")
    reviews_today: int = Field(description="Today's reviews: every card due before tomorrow "
                                           "(UTC) as the day began, reviewed since or not.")
    new_today: int | None = Field(description="The plan's new questions today, as the day "
                                              "began (null without an interview date).")
    new_left: int | None = Field(description="The plan's new questions still to introduce "
                                             "today (null without an interview date).")
    answered_today: int
    daily_goal: int = Field(description="Answers to aim for today, fixed for the day: "
                                        "reviews_today + new_today, or 10 without a plan.")
    streak: int = Field(description="Days in a row with an answer, up to today.")


class TopicRowOut(BaseModel):
    slug: str
    title: str
    round: Literal["ddp", "large-model", "incident", "design"]
    questions: int
    seen: int
    now: float = Field(description="Mastery now, 0..1 (as `mastery[].recall`).")
    due: int = Field(description="Cards of the topic due now.")
    on_date: float | None = Field(description="Mastery on the interview date if you stop now.")
    planned: float | None = Field(description="Mastery on the interview date with the plan.")


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
    today: TodayOut
    due_now: int = Field(description="Cards due now (the same as today.due_now).")
    topics: list[TopicRowOut]
    mastery: list[TopicMasteryOut]
    weeks: list[WeekOut]
    days_practised: dict[str, int] = Field(description="Answers per day (ISO date).")
    due_next_7_days: list[DueDayOut]
    weakest: list[TopicMasteryOut]
    reports: list[ReportStatusOut]
    forecast: ForecastOut | None
