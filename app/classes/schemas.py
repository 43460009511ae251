"""Shapes of the classes API (/api/v1)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

Status = Literal["not open", "not started", "in progress", "overdue", "done", "late",
                 "solution viewed"]


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


class MarkOut(BaseModel):
    """The instructor's mark of a talk-through answer, by the question's rubric."""

    ticked: list[int] = Field(description="The rubric's moves the answer made, by number.")
    score: float = Field(description="The share of the rubric's moves ticked (0..1): what the "
                                     "class counts instead of the learner's own ticks.")
    comment: str
    marked_at: datetime


class TalkAnswerOut(BaseModel):
    """A member's talk-through answer the class counts, for its instructor to mark."""

    attempt_id: int
    assignment_id: int
    class_id: str = Field(description="The member's pseudonymous id in this class.")
    username: str
    question: str = Field(description="The question's slug.")
    title: str
    variant: int
    text: str = Field(description="What the member wrote.")
    rubric: list[str]
    self_ticked: list[int] = Field(description="The moves the member ticked themselves.")
    self_score: float
    mark: MarkOut | None = Field(description="Your mark, once given (None: waiting).")


class MyMarkOut(BaseModel):
    """Your instructor's mark of one of your talk-through answers."""

    assignment_id: int
    question: str
    title: str
    rubric: list[str]
    self_ticked: list[int]
    self_score: float
    mark: MarkOut


class MyClassOut(BaseModel):
    id: int
    name: str
    instructor: str
    class_id: str = Field(description="Your pseudonymous id in this class.")
    joined_at: datetime
    assignments: list[AssignmentOut]
    work: list[WorkOut]
    marks: list[MyMarkOut] = Field([], description="Your talk-through answers your instructor "
                                                   "marked (their mark replaces your ticks).")
