"""runs.share_key: whose share of the private lane a run is. A signed-in class member's runs
are their account's share ("account:<learner>"); every other private run's share is its
address (NULL here). The claim gives the next private run to the share with the least
running time lately.

Revision ID: doors_0014
Revises: doors_0013
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "doors_0014"
down_revision: str | None = "doors_0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("share_key", sa.String(length=200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("share_key")
