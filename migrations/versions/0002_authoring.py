"""authoring: draft revisions, session versions, login attempts, pending bank uploads

Revision ID: 0002
Revises: 0001
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        # A plain ADD COLUMN: batch mode would copy and drop `questions`, and with
        # foreign keys on, dropping it cascades into question_revisions.
        op.execute(
            "ALTER TABLE questions ADD COLUMN draft_revision_id INTEGER "
            "CONSTRAINT fk_questions_draft_revision "
            "REFERENCES question_revisions (id) ON DELETE SET NULL"
        )
    else:
        op.add_column("questions", sa.Column("draft_revision_id", sa.Integer(), nullable=True))
        op.create_foreign_key(
            "fk_questions_draft_revision", "questions", "question_revisions",
            ["draft_revision_id"], ["id"], ondelete="SET NULL",
        )
    op.add_column(
        "users", sa.Column("session_version", sa.Integer(), nullable=False, server_default="0")
    )
    op.create_table(
        "login_attempts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("username", sa.String(length=64), nullable=False),
        sa.Column("client_ip", sa.String(length=64), nullable=False),
        sa.Column("created_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_login_attempts")),
    )
    op.create_index("ix_login_attempts_key", "login_attempts",
                    ["username", "client_ip", "created_at"])
    op.create_table(
        "bank_uploads",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("filename", sa.String(length=200), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"],
                                name=op.f("fk_bank_uploads_user_id_users"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bank_uploads")),
    )


def downgrade() -> None:
    op.drop_table("bank_uploads")
    op.drop_index("ix_login_attempts_key", table_name="login_attempts")
    op.drop_table("login_attempts")
    if op.get_bind().dialect.name == "sqlite":
        # SQLite 3.35+ drops these in place: neither is referenced by another table.
        op.execute("ALTER TABLE users DROP COLUMN session_version")
        op.execute("ALTER TABLE questions DROP COLUMN draft_revision_id")
    else:
        op.drop_column("users", "session_version")
        op.drop_constraint("fk_questions_draft_revision", "questions", type_="foreignkey")
        op.drop_column("questions", "draft_revision_id")
