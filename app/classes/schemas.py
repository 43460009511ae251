"""Shapes of the classes API (/api/v1)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

Status = Literal["not open", "not started", "in progress", "overdue", "done", "late"]


class ClassOut(BaseModel):
    id: int
    name: str
    members: int
    assignments: int
    created_at: datetime


class AssignmentOut(BaseModel):
    id: int
    kind: Literal["quiz", "mock", "exercises"]
    title: str
    opens_at: datetime
    due_at: datetime
    required: int = Field(description="Questions a member answers to be done (1 for a mock).")
    done: int = Field(description="Members who did it by the due date.")
    late: int = Field(description="Members who did it after the due date.")


class WorkOut(BaseModel):
    assignment_id: int
    status: Status
    answered: int
    score: float = Field(description="0..1 over the assignment's required questions; for a "
                                     "mock, the share of its questions right once it is over.")
    done_at: datetime | None


class MemberOut(BaseModel):
    class_id: str = Field(description="The member's pseudonymous id in this class (the CSV's key).")
    username: str
    joined_at: datetime
    work: list[WorkOut]
    mastery: list[float] = Field(description="Per topic of `topics`, FSRS's mean predicted recall "
                                             "over its published questions (unseen as 0), 0..1.")
    overdue: list[int] = Field(description="Assignments past their due date not done.")


class TopicOut(BaseModel):
    slug: str
    title: str


class ClassReportOut(BaseModel):
    id: int
    name: str
    now: datetime
    assignments: list[AssignmentOut]
    topics: list[TopicOut]
    members: list[MemberOut]


class MyClassOut(BaseModel):
    id: int
    name: str
    instructor: str
    class_id: str = Field(description="Your pseudonymous id in this class.")
    joined_at: datetime
    assignments: list[AssignmentOut]
    work: list[WorkOut]
