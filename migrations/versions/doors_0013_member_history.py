"""class_members.left_at: leaving a class stamps the membership instead of deleting it, so a
learner who re-joins is the same member with the same class id, joining time and work (a
deleted row let "the first answer counts" start again). Every class read skips a member
whose left_at is set.

Revision ID: doors_0013
Revises: classes_0012
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "doors_0013"
down_revision: str | None = "classes_0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("class_members") as batch:
        batch.add_column(sa.Column("left_at", app.db.UTCDateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("class_members") as batch:
        batch.drop_column("left_at")
