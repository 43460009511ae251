"""The one list of models. Importing it registers every table on Base.metadata.

app.db imports it whenever an engine or session factory is made, and Alembic's env
imports it, so a model added here is known to every entry point.
"""

from app.accounts.models import AuditEntry, Learner, User
from app.authoring.models import BankUpload
from app.classes.models import Assignment, AssignmentQuestion, AssignmentStart, ClassMember, Classroom
from app.db import Base
from app.exercises.models import ExerciseSubmission
from app.mock.models import MockInterview
from app.progress.models import LearnerGoal
from app.questions.models import Question, QuestionRevision, Topic
from app.quizzes.models import Attempt, PartialAnswer, Quiz, QuizItem
from app.ratelimit import RateHit
from app.reports.models import ProblemReport
from app.review.models import LearnerSchedule, ReviewCard, ReviewLog, ScheduleFit
from app.verify.models import Run, Verdict

__all__ = [
    "Assignment",
    "AssignmentQuestion",
    "AssignmentStart",
    "Attempt",
    "AuditEntry",
    "BankUpload",
    "Base",
    "ClassMember",
    "Classroom",
    "ExerciseSubmission",
    "Learner",
    "LearnerGoal",
    "LearnerSchedule",
    "MockInterview",
    "PartialAnswer",
    "ProblemReport",
    "Question",
    "QuestionRevision",
    "Quiz",
    "QuizItem",
    "RateHit",
    "ReviewCard",
    "ReviewLog",
    "Run",
    "ScheduleFit",
    "Topic",
    "User",
    "Verdict",
]
