"""mock interviews (server-held deadline, share link) and learners' interview goals

Revision ID: learn_b_0005
Revises: exercises_0005
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "learn_b_0005"
down_revision: str | None = "exercises_0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "mock_interviews",
        sa.Column("quiz_id", sa.String(length=36), nullable=False),
        sa.Column("learner_id", sa.String(length=36), nullable=False),
        sa.Column("minutes", sa.Integer(), nullable=False),
        sa.Column("started_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("deadline", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("finished_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("share_token", sa.String(length=64), nullable=True),
        sa.ForeignKeyConstraint(["learner_id"], ["learners.id"],
                                name=op.f("fk_mock_interviews_learner_id_learners")),
        sa.ForeignKeyConstraint(["quiz_id"], ["quizzes.id"],
                                name=op.f("fk_mock_interviews_quiz_id_quizzes"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("quiz_id", name=op.f("pk_mock_interviews")),
        sa.UniqueConstraint("share_token", name=op.f("uq_mock_interviews_share_token")),
    )
    op.create_index("ix_mock_interviews_learner_id", "mock_interviews", ["learner_id"])
    op.create_table(
        "learner_goals",
        sa.Column("learner_id", sa.String(length=36), nullable=False),
        sa.Column("interview_date", sa.Date(), nullable=True),
        sa.Column("target", sa.Double(), nullable=False),
        sa.Column("updated_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["learner_id"], ["learners.id"],
                                name=op.f("fk_learner_goals_learner_id_learners")),
        sa.PrimaryKeyConstraint("learner_id", name=op.f("pk_learner_goals")),
    )


def downgrade() -> None:
    op.drop_table("learner_goals")
    op.drop_index("ix_mock_interviews_learner_id", table_name="mock_interviews")
    op.drop_table("mock_interviews")
