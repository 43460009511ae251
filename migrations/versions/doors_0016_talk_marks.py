"""class_talk_marks: an instructor's mark of a member's talk-through answer by its rubric (the
moves ticked, the score that replaces the self-score in the class, a comment for the learner),
one per class and answer.

Revision ID: doors_0016
Revises: doors_0015
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "doors_0016"
down_revision: str | None = "doors_0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "class_talk_marks",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("class_id", sa.Integer(), sa.ForeignKey("classes.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("attempt_id", sa.Integer(), sa.ForeignKey("attempts.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("grader_id", sa.Integer(), sa.ForeignKey("users.id", ondelete="SET NULL"),
                  nullable=True),
        sa.Column("ticked", sa.JSON(), nullable=False),
        sa.Column("score", sa.Double(), nullable=False),
        sa.Column("comment", sa.Text(), nullable=False),
        sa.Column("marked_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("class_id", "attempt_id"),
    )
    op.create_index("ix_class_talk_marks_attempt_id", "class_talk_marks", ["attempt_id"])


def downgrade() -> None:
    op.drop_index("ix_class_talk_marks_attempt_id", table_name="class_talk_marks")
    op.drop_table("class_talk_marks")
