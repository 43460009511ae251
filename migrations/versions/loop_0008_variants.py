"""variants in the learning loop: attempts, quiz items and problem reports name their variant;
answers given in steps (cases, talk-throughs) are kept until complete

Revision ID: loop_0008
Revises: learn_0008
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "loop_0008"
down_revision: str | None = "learn_0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Every existing row answered (or asked) the only variant its question had: 0.
    for table in ("attempts", "quiz_items", "problem_reports"):
        op.add_column(table, sa.Column("variant", sa.Integer(), nullable=False, server_default="0"))
    op.create_table(
        "partial_answers",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("learner_id", sa.String(length=36), nullable=False),
        sa.Column("question_id", sa.Integer(), nullable=False),
        sa.Column("revision_id", sa.Integer(), nullable=False),
        sa.Column("variant", sa.Integer(), nullable=False),
        sa.Column("slot", sa.String(length=32), nullable=False),
        sa.Column("quiz_item_id", sa.Integer(), nullable=True),
        sa.Column("state", sa.JSON(), nullable=False),
        sa.Column("created_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["learner_id"], ["learners.id"],
                                name=op.f("fk_partial_answers_learner_id_learners")),
        sa.ForeignKeyConstraint(["question_id"], ["questions.id"],
                                name=op.f("fk_partial_answers_question_id_questions")),
        sa.ForeignKeyConstraint(["revision_id"], ["question_revisions.id"],
                                name=op.f("fk_partial_answers_revision_id_question_revisions")),
        sa.ForeignKeyConstraint(["quiz_item_id"], ["quiz_items.id"],
                                name=op.f("fk_partial_answers_quiz_item_id_quiz_items"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_partial_answers")),
        sa.UniqueConstraint("learner_id", "question_id", "slot",
                            name=op.f("uq_partial_answers_learner_id_question_id_slot")),
    )
    op.create_index("ix_partial_answers_learner_id", "partial_answers", ["learner_id"])


def downgrade() -> None:
    op.drop_index("ix_partial_answers_learner_id", table_name="partial_answers")
    op.drop_table("partial_answers")
    for table in ("problem_reports", "quiz_items", "attempts"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("variant")
