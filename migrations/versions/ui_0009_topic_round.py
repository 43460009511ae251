"""Topics have a round: the interview round (ddp, large-model, incident, design) the home page
and the quiz builder list them under.

Revision ID: ui_0009
Revises: loop_0008
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "ui_0009"
down_revision: str | None = "loop_0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("topics", sa.Column("round", sa.String(length=16), nullable=False,
                                      server_default="ddp"))


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute('ALTER TABLE topics DROP COLUMN "round"')
    else:
        op.drop_column("topics", "round")
