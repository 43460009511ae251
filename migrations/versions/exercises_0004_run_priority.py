"""Runs carry a queue priority: learner code (exercises) waits behind authors and shared runs.

Revision ID: exercises_0004
Revises: 0003
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "exercises_0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A plain ADD COLUMN with a server default: existing runs are ordinary (0).
    op.add_column("runs", sa.Column("priority", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("ALTER TABLE runs DROP COLUMN priority")
    else:
        op.drop_column("runs", "priority")
