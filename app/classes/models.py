"""Classes: an instructor's class, its members, its assignments and the quizzes started from them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, utcnow

KIND_QUIZ = "quiz"
KIND_MOCK = "mock"
KIND_EXERCISES = "exercises"
KINDS = (KIND_QUIZ, KIND_MOCK, KIND_EXERCISES)


class Classroom(Base):
    """A class an instructor runs. `join_token` is the join link's capability: a new one
    replaces the old link, and None means the class takes no one new."""

    __tablename__ = "classes"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(120))
    instructor_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"),
                                               index=True)
    join_token: Mapped[str | None] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ClassMember(Base):
    """A learner account in a class, for good: leaving stamps `left_at`, which hides the
    learner from the class at once, and joining again clears it, restoring the same member
    (class id, joining time, work). `pseudonym` is the learner's id in this class only (the
    CSV's key)."""

    __tablename__ = "class_members"

    id: Mapped[int] = mapped_column(primary_key=True)
    class_id: Mapped[int] = mapped_column(ForeignKey("classes.id", ondelete="CASCADE"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    # The account's learner identity (an account owns exactly one): whose attempts count.
    learner_id: Mapped[str] = mapped_column(ForeignKey("learners.id", ondelete="CASCADE"),
                                            index=True)
    pseudonym: Mapped[str] = mapped_column(String(16))
    # Work before this moment is not the class's to see (the first joining: a learner who
    # re-joins keeps it, and their work since).
    joined_at: Mapped[datetime] = mapped_column(default=utcnow)
    # Set while the learner has left the class (every class read skips them); None in it.
    left_at: Mapped[datetime | None]

    __table_args__ = (UniqueConstraint("class_id", "user_id"),
                      UniqueConstraint("class_id", "pseudonym"))


class Assignment(Base):
    """A quiz (of topics or of a fixed list), a mock interview or a set of exercises, open from
    `opens_at`, due at `due_at`; work after the due date still counts and is marked late."""

    __tablename__ = "class_assignments"

    id: Mapped[int] = mapped_column(primary_key=True)
    class_id: Mapped[int] = mapped_column(ForeignKey("classes.id", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(16))
    title: Mapped[str] = mapped_column(String(120))
    # The topics a topic quiz was drawn from (for the page; its questions are the rows below).
    topics: Mapped[list[Any]] = mapped_column(default=list)
    # How many of the questions a learner answers to be done (a topic quiz asks a few of many).
    required: Mapped[int]
    minutes: Mapped[int | None]  # a mock interview's length
    opens_at: Mapped[datetime]
    due_at: Mapped[datetime]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class AssignmentQuestion(Base):
    """A question of an assignment, fixed when the assignment is made. `variant` is the one
    the instructor picked for a question with variables (None: any)."""

    __tablename__ = "class_assignment_questions"

    assignment_id: Mapped[int] = mapped_column(
        ForeignKey("class_assignments.id", ondelete="CASCADE"), primary_key=True)
    question_id: Mapped[int] = mapped_column(ForeignKey("questions.id", ondelete="CASCADE"),
                                             primary_key=True, index=True)
    position: Mapped[int]
    variant: Mapped[int | None]


class AssignmentStart(Base):
    """The quiz or mock interview a member started from an assignment (one per member)."""

    __tablename__ = "class_assignment_starts"

    id: Mapped[int] = mapped_column(primary_key=True)
    assignment_id: Mapped[int] = mapped_column(ForeignKey("class_assignments.id", ondelete="CASCADE"))
    learner_id: Mapped[str] = mapped_column(ForeignKey("learners.id", ondelete="CASCADE"), index=True)
    quiz_id: Mapped[str] = mapped_column(ForeignKey("quizzes.id", ondelete="CASCADE"))
    started_at: Mapped[datetime] = mapped_column(default=utcnow)

    __table_args__ = (UniqueConstraint("assignment_id", "learner_id"),
                      Index("ix_class_assignment_starts_quiz", "quiz_id", unique=True))


class TalkMark(Base):
    """The class's instructor's mark of a member's talk-through answer, by the question's
    rubric (PrairieLearn's manual grading): the moves they ticked, the score that replaces the
    learner's own on the class page and in the CSV, and a comment the learner reads. One per
    class and answer; marking again replaces it."""

    __tablename__ = "class_talk_marks"

    id: Mapped[int] = mapped_column(primary_key=True)
    class_id: Mapped[int] = mapped_column(ForeignKey("classes.id", ondelete="CASCADE"))
    attempt_id: Mapped[int] = mapped_column(ForeignKey("attempts.id", ondelete="CASCADE"),
                                            index=True)
    grader_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    ticked: Mapped[list[Any]] = mapped_column(JSON, default=list)
    score: Mapped[float]
    comment: Mapped[str] = mapped_column(Text, default="")
    marked_at: Mapped[datetime] = mapped_column(default=utcnow)

    __table_args__ = (UniqueConstraint("class_id", "attempt_id"),)
