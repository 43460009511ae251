"""attempts.claimed_at: when an anonymous identity's answer was moved into a learner account
(sign-up, sign-in). A claimed answer is the learner's history, never a class's work. The
attempts' class-page index widens to cover it and the quiz item (a live mock interview's
answers count once it is over), so the class page still reads no attempt's row.

Revision ID: doors_0015
Revises: doors_0014
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "doors_0015"
down_revision: str | None = "doors_0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD = ["learner_id", "question_id", "created_at", "variant", "score"]
NEW = [*OLD, "quiz_item_id", "claimed_at"]


def upgrade() -> None:
    with op.batch_alter_table("attempts") as batch:
        batch.add_column(sa.Column("claimed_at", app.db.UTCDateTime(timezone=True), nullable=True))
    op.drop_index("ix_attempts_learner_question_time", table_name="attempts")
    op.create_index("ix_attempts_learner_question_time", "attempts", NEW)


def downgrade() -> None:
    op.drop_index("ix_attempts_learner_question_time", table_name="attempts")
    op.create_index("ix_attempts_learner_question_time", "attempts", OLD)
    with op.batch_alter_table("attempts") as batch:
        batch.drop_column("claimed_at")
