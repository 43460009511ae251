"""Per-learner FSRS parameters and desired retention, and the fits that compute them.

Revision ID: learn_0008
Revises: ex_0008
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "learn_0008"
down_revision: str | None = "ex_0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "learner_schedules",
        sa.Column("learner_id", sa.String(length=36), nullable=False),
        sa.Column("desired_retention", sa.Double(), nullable=False),
        sa.Column("parameters", sa.JSON(), nullable=True),
        sa.Column("fitted_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("fitted_reviews", sa.Integer(), nullable=True),
        sa.Column("fitted_loss", sa.Double(), nullable=True),
        sa.Column("default_loss", sa.Double(), nullable=True),
        sa.Column("optimal_retention", sa.Double(), nullable=True),
        sa.Column("updated_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["learner_id"], ["learners.id"],
                                name=op.f("fk_learner_schedules_learner_id_learners")),
        sa.PrimaryKeyConstraint("learner_id", name=op.f("pk_learner_schedules")),
    )
    op.create_table(
        "schedule_fits",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("learner_id", sa.String(length=36), nullable=False),
        sa.Column("pending", sa.Boolean(), nullable=True),
        sa.Column("reason", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("lease_owner", sa.String(length=100), nullable=True),
        sa.Column("lease_expires_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("failure_reason", sa.Text(), nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=True),
        sa.Column("reviews", sa.Integer(), nullable=True),
        sa.Column("eligible", sa.Integer(), nullable=True),
        sa.Column("seconds", sa.Double(), nullable=True),
        sa.Column("requested_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("claimed_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("started_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("finished_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["learner_id"], ["learners.id"], ondelete="CASCADE",
                                name=op.f("fk_schedule_fits_learner_id_learners")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_schedule_fits")),
        sa.UniqueConstraint("learner_id", "pending", name=op.f("uq_schedule_fits_learner_id_pending")),
    )
    op.create_index("ix_schedule_fits_status_requested", "schedule_fits", ["status", "requested_at"])
    op.create_index("ix_schedule_fits_learner_requested", "schedule_fits",
                    ["learner_id", "requested_at"])


def downgrade() -> None:
    op.drop_table("schedule_fits")
    op.drop_table("learner_schedules")
