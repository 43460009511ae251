"""A learner's finished exercise submissions (three failed ones open the solution).

Revision ID: ex_0008
Revises: house_0007
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "ex_0008"
down_revision: str | None = "house_0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "exercise_submissions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("learner_id", sa.String(length=36), nullable=False),
        sa.Column("question_id", sa.Integer(), nullable=False),
        sa.Column("token", sa.String(length=200), nullable=False),
        sa.Column("passed", sa.Boolean(), nullable=False),
        sa.Column("gave_up", sa.Boolean(), nullable=False),
        sa.Column("created_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["learner_id"], ["learners.id"],
                                name=op.f("fk_exercise_submissions_learner_id_learners")),
        sa.ForeignKeyConstraint(["question_id"], ["questions.id"],
                                name=op.f("fk_exercise_submissions_question_id_questions")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_exercise_submissions")),
        sa.UniqueConstraint("token", name=op.f("uq_exercise_submissions_token")),
    )
    op.create_index("ix_exercise_submissions_learner_question", "exercise_submissions",
                    ["learner_id", "question_id"])


def downgrade() -> None:
    op.drop_table("exercise_submissions")
