"""Imports every model so that metadata (and Alembic) sees all tables."""

from app.authoring.models import AuditEntry, User
from app.db import Base
from app.practice.models import Attempt, Learner, Quiz, QuizItem, ReviewCard
from app.questions.models import Question, QuestionRevision, Topic
from app.verify.models import Run, Verdict

__all__ = [
    "Attempt",
    "AuditEntry",
    "Base",
    "Learner",
    "Question",
    "QuestionRevision",
    "Quiz",
    "QuizItem",
    "ReviewCard",
    "Run",
    "Topic",
    "User",
    "Verdict",
]
