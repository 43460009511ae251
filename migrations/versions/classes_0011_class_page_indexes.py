"""The class page's indexes: review_cards.stability, generated from the card's JSON, with
an index for class mastery; the attempts' (learner, question) index widened to cover the
class page's lookups.

The class page sums FSRS recall over every card of a class's members; reading each card's
row and parsing its JSON for the stability was most of that work. The column is generated
by the database from the JSON (virtual on SQLite, stored on PostgreSQL), so no write path
has to keep it; the index (learner, question, last review, stability) answers the sum
without reading the cards' rows. The work on assignments looks up every (member, question)
pair's attempts since a date: (learner, question, created_at, variant, score) answers that
from the index (it replaces (learner, question), which it serves as well).

Revision ID: classes_0011
Revises: classes_0010
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "classes_0011"
down_revision: str | None = "classes_0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# As app.review.models.SQL_OF_STABILITY says it (a migration does not import the models).
STABILITY = {
    "sqlite": "json_extract(card, '$.stability')",
    "postgresql": "CAST((card ->> 'stability') AS DOUBLE PRECISION)",
}


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    # Virtual on SQLite (it cannot add a stored column to a table), stored on PostgreSQL.
    sqlite = dialect == "sqlite"
    expression = STABILITY[dialect]
    op.add_column("review_cards", sa.Column("stability", sa.Double(),
                                            sa.Computed(expression, persisted=not sqlite),
                                            nullable=True))
    op.create_index("ix_review_cards_learner_recall", "review_cards",
                    ["learner_id", "question_id", "last_review", "stability"])
    op.create_index("ix_attempts_learner_question_time", "attempts",
                    ["learner_id", "question_id", "created_at", "variant", "score"])
    op.drop_index("ix_attempts_learner_question", table_name="attempts")


def downgrade() -> None:
    op.create_index("ix_attempts_learner_question", "attempts", ["learner_id", "question_id"])
    op.drop_index("ix_attempts_learner_question_time", table_name="attempts")
    op.drop_index("ix_review_cards_learner_recall", table_name="review_cards")
    op.drop_column("review_cards", "stability")
