"""Topics have a group: the heading the home page lists them under.

Revision ID: 0004
Revises: 0003
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("topics", sa.Column("group", sa.String(length=80), nullable=False,
                                      server_default=""))


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute('ALTER TABLE topics DROP COLUMN "group"')
    else:
        op.drop_column("topics", "group")
