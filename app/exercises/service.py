"""What the exercise page remembers for a learner: whether (and with what code) they solved
an exercise, and which exercise comes next. Running and checking code is app/verify/exercise.py."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.questions.models import STATUS_PUBLISHED, Question, Topic
from app.quizzes.models import Attempt


@dataclass
class Solved:
    """The learner's latest passing submission of an exercise."""

    at: datetime
    code: str


def solved(*, db_session: Session, learner_id: str, question_id: int) -> Solved | None:
    """The learner's latest passing code for the exercise, if they have solved it."""
    attempt = db_session.scalar(
        select(Attempt).where(Attempt.learner_id == learner_id, Attempt.question_id == question_id,
                              Attempt.correct.is_(True))
        .order_by(Attempt.created_at.desc(), Attempt.id.desc()).limit(1))
    if attempt is None:
        return None
    answer = attempt.answer
    code = answer.get("code") if isinstance(answer, dict) else None
    return Solved(attempt.created_at, code if isinstance(code, str) else "")


@dataclass
class ExerciseLink:
    slug: str
    title: str


def next_exercise(*, db_session: Session, slug: str) -> ExerciseLink | None:
    """The published exercise after this one (by topic, difficulty, slug), wrapping around."""
    rows = db_session.execute(
        select(Question.slug, Question.title).join(Topic, Topic.slug == Question.topic)
        .where(Question.status == STATUS_PUBLISHED, Question.type == "exercise")
        .order_by(Topic.position, Question.difficulty, Question.slug)).all()
    slugs = [s for s, _ in rows]
    if slug not in slugs or len(slugs) < 2:
        return None
    after, title = rows[(slugs.index(slug) + 1) % len(rows)]
    return ExerciseLink(after, title)
