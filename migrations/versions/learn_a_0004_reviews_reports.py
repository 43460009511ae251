"""learner accounts, confidence, FSRS review cards and logs, problem reports

Revision ID: learn_a_0004
Revises: 0004
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "learn_a_0004"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ADD COLUMNs: SQLite's batch mode would copy and drop the tables.
    op.add_column("attempts", sa.Column("confidence", sa.String(length=8), nullable=True))
    op.add_column("review_cards",
                  sa.Column("reps", sa.Integer(), nullable=False, server_default="0"))
    op.add_column("review_cards",
                  sa.Column("last_review", app.db.UTCDateTime(timezone=True), nullable=True))
    op.create_index("ix_review_cards_learner_due", "review_cards", ["learner_id", "due"])
    op.create_index("ix_learners_user_id", "learners", ["user_id"])
    op.create_table(
        "review_logs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("card_id", sa.Integer(), nullable=False),
        sa.Column("learner_id", sa.String(length=36), nullable=False),
        sa.Column("attempt_id", sa.Integer(), nullable=True),
        sa.Column("rating", sa.Integer(), nullable=False),
        sa.Column("reviewed_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("log", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["attempt_id"], ["attempts.id"],
                                name=op.f("fk_review_logs_attempt_id_attempts"), ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["card_id"], ["review_cards.id"],
                                name=op.f("fk_review_logs_card_id_review_cards"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["learner_id"], ["learners.id"],
                                name=op.f("fk_review_logs_learner_id_learners")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_review_logs")),
    )
    op.create_index("ix_review_logs_card_id", "review_logs", ["card_id"])
    op.create_index("ix_review_logs_learner_id", "review_logs", ["learner_id"])
    op.create_table(
        "problem_reports",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("learner_id", sa.String(length=36), nullable=False),
        sa.Column("question_id", sa.Integer(), nullable=False),
        sa.Column("revision_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("comment", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("handled_by", sa.Integer(), nullable=True),
        sa.Column("created_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("handled_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["handled_by"], ["users.id"],
                                name=op.f("fk_problem_reports_handled_by_users"), ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["learner_id"], ["learners.id"],
                                name=op.f("fk_problem_reports_learner_id_learners")),
        sa.ForeignKeyConstraint(["question_id"], ["questions.id"],
                                name=op.f("fk_problem_reports_question_id_questions")),
        sa.ForeignKeyConstraint(["revision_id"], ["question_revisions.id"],
                                name=op.f("fk_problem_reports_revision_id_question_revisions")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_problem_reports")),
    )
    op.create_index("ix_problem_reports_learner_id", "problem_reports", ["learner_id"])
    op.create_index("ix_problem_reports_status_question", "problem_reports",
                    ["status", "question_id"])


def downgrade() -> None:
    op.drop_index("ix_problem_reports_status_question", table_name="problem_reports")
    op.drop_index("ix_problem_reports_learner_id", table_name="problem_reports")
    op.drop_table("problem_reports")
    op.drop_index("ix_review_logs_learner_id", table_name="review_logs")
    op.drop_index("ix_review_logs_card_id", table_name="review_logs")
    op.drop_table("review_logs")
    op.drop_index("ix_learners_user_id", table_name="learners")
    op.drop_index("ix_review_cards_learner_due", table_name="review_cards")
    if op.get_bind().dialect.name == "sqlite":
        op.execute("ALTER TABLE review_cards DROP COLUMN last_review")
        op.execute("ALTER TABLE review_cards DROP COLUMN reps")
        op.execute("ALTER TABLE attempts DROP COLUMN confidence")
    else:
        op.drop_column("review_cards", "last_review")
        op.drop_column("review_cards", "reps")
        op.drop_column("attempts", "confidence")
