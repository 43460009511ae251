"""Runs carry a queue priority: learner code (exercises) waits behind authors and shared runs.

Revision ID: exercises_0005
Revises: learn_a_0004
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "exercises_0005"
down_revision: str | None = "learn_a_0004"
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
