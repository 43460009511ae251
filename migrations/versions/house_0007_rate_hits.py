"""One table for every rate limit (app/ratelimit.py); failed sign-ins move into it.

Revision ID: house_0007
Revises: trust_0006
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "house_0007"
down_revision: str | None = "trust_0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "rate_hits",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("bucket", sa.String(length=32), nullable=False),
        sa.Column("key", sa.String(length=160), nullable=False),
        sa.Column("at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rate_hits")),
    )
    op.create_index("ix_rate_hits_bucket_key_at", "rate_hits", ["bucket", "key", "at"])
    op.create_index("ix_rate_hits_bucket_at", "rate_hits", ["bucket", "at"])
    # Counts of the last hour carry over, so a limit in force stays in force.
    op.execute("INSERT INTO rate_hits (bucket, key, at) SELECT "
               "CASE WHEN username = '~signup' THEN 'signup' ELSE 'login' END, "
               "CASE WHEN username = '~signup' THEN client_ip ELSE username || ':' || client_ip END, "
               "created_at FROM login_attempts")
    op.drop_table("login_attempts")


def downgrade() -> None:
    op.create_table(
        "login_attempts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("username", sa.String(length=64), nullable=False),
        sa.Column("client_ip", sa.String(length=64), nullable=False),
        sa.Column("created_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_login_attempts")),
    )
    op.create_index("ix_login_attempts_key", "login_attempts", ["username", "client_ip", "created_at"])
    op.drop_table("rate_hits")
