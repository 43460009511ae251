"""The one list of models. Importing it registers every table on Base.metadata.

app.db imports it whenever an engine or session factory is made, and Alembic's env
imports it, so a model added here is known to every entry point.
"""

from app.accounts.models import AuditEntry, LoginAttempt, User
from app.authoring.models import BankUpload
from app.db import Base
from app.practice.models import (
    Attempt,
    Learner,
    ProblemReport,
    Quiz,
    QuizItem,
    ReviewCard,
    ReviewLog,
)
from app.questions.models import Question, QuestionRevision, Topic
from app.verify.models import Run, Verdict

__all__ = [
    "Attempt",
    "AuditEntry",
    "BankUpload",
    "Base",
    "Learner",
    "LoginAttempt",
    "ProblemReport",
    "Question",
    "QuestionRevision",
    "Quiz",
    "QuizItem",
    "ReviewCard",
    "ReviewLog",
    "Run",
    "Topic",
    "User",
    "Verdict",
]
