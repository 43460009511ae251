"""Runs remember the client address that requested them (per-address rate limit).

Revision ID: 0003
Revises: 0002
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A plain ADD COLUMN: SQLite's batch mode would copy and drop the table.
    op.add_column("runs", sa.Column("requested_ip", sa.String(length=64), nullable=True))
    op.create_index("ix_runs_requested_ip", "runs", ["requested_ip", "requested_at"])


def downgrade() -> None:
    op.drop_index("ix_runs_requested_ip", table_name="runs")
    if op.get_bind().dialect.name == "sqlite":
        op.execute("ALTER TABLE runs DROP COLUMN requested_ip")
    else:
        op.drop_column("runs", "requested_ip")
