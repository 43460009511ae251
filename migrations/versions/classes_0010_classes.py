"""Classes: an instructor's classes, their members, assignments and the quizzes started from them.

Revision ID: classes_0010
Revises: ui_0009 (written on house_0007; re-chained onto loop_0008, then ui_0009)
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "classes_0010"
down_revision: str | None = "ui_0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "classes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=120), nullable=False),
        sa.Column("instructor_id", sa.Integer(), nullable=False),
        sa.Column("join_token", sa.String(length=64), nullable=True),
        sa.Column("created_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["instructor_id"], ["users.id"],
                                name=op.f("fk_classes_instructor_id_users"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_classes")),
        sa.UniqueConstraint("join_token", name=op.f("uq_classes_join_token")),
    )
    op.create_index(op.f("ix_classes_instructor_id"), "classes", ["instructor_id"])
    op.create_table(
        "class_assignments",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("class_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("title", sa.String(length=120), nullable=False),
        sa.Column("topics", sa.JSON(), nullable=False),
        sa.Column("required", sa.Integer(), nullable=False),
        sa.Column("minutes", sa.Integer(), nullable=True),
        sa.Column("opens_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("due_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("created_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["class_id"], ["classes.id"],
                                name=op.f("fk_class_assignments_class_id_classes"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_class_assignments")),
    )
    op.create_index(op.f("ix_class_assignments_class_id"), "class_assignments", ["class_id"])
    op.create_table(
        "class_members",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("class_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("learner_id", sa.String(length=36), nullable=False),
        sa.Column("pseudonym", sa.String(length=16), nullable=False),
        sa.Column("joined_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["class_id"], ["classes.id"],
                                name=op.f("fk_class_members_class_id_classes"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["learner_id"], ["learners.id"],
                                name=op.f("fk_class_members_learner_id_learners"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"],
                                name=op.f("fk_class_members_user_id_users"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_class_members")),
        sa.UniqueConstraint("class_id", "pseudonym", name=op.f("uq_class_members_class_id_pseudonym")),
        sa.UniqueConstraint("class_id", "user_id", name=op.f("uq_class_members_class_id_user_id")),
    )
    op.create_index(op.f("ix_class_members_learner_id"), "class_members", ["learner_id"])
    op.create_index(op.f("ix_class_members_user_id"), "class_members", ["user_id"])
    op.create_table(
        "class_assignment_questions",
        sa.Column("assignment_id", sa.Integer(), nullable=False),
        sa.Column("question_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("variant", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["assignment_id"], ["class_assignments.id"],
                                name=op.f("fk_class_assignment_questions_assignment_id_class_assignments"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["question_id"], ["questions.id"],
                                name=op.f("fk_class_assignment_questions_question_id_questions"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("assignment_id", "question_id", name=op.f("pk_class_assignment_questions")),
    )
    op.create_index(op.f("ix_class_assignment_questions_question_id"), "class_assignment_questions",
                    ["question_id"])
    op.create_table(
        "class_assignment_starts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("assignment_id", sa.Integer(), nullable=False),
        sa.Column("learner_id", sa.String(length=36), nullable=False),
        sa.Column("quiz_id", sa.String(length=36), nullable=False),
        sa.Column("started_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["assignment_id"], ["class_assignments.id"],
                                name=op.f("fk_class_assignment_starts_assignment_id_class_assignments"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["learner_id"], ["learners.id"],
                                name=op.f("fk_class_assignment_starts_learner_id_learners"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["quiz_id"], ["quizzes.id"],
                                name=op.f("fk_class_assignment_starts_quiz_id_quizzes"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_class_assignment_starts")),
        sa.UniqueConstraint("assignment_id", "learner_id",
                            name=op.f("uq_class_assignment_starts_assignment_id_learner_id")),
    )
    op.create_index(op.f("ix_class_assignment_starts_learner_id"), "class_assignment_starts", ["learner_id"])
    op.create_index("ix_class_assignment_starts_quiz", "class_assignment_starts", ["quiz_id"], unique=True)


def downgrade() -> None:
    op.drop_table("class_assignment_starts")
    op.drop_table("class_assignment_questions")
    op.drop_table("class_members")
    op.drop_table("class_assignments")
    op.drop_table("classes")
