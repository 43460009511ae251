"""review_cards.last_rating: the rating of each card's last review, kept with the schedule
it made, and in the class-mastery index, whose columns are now (learner, last review,
question, stability, last rating).

Mastery counts a card only if its last review recalled it. That was found by searching the
card's review log for its newest row on every read (the dashboard read every log of the
learner; the class page ran an anti-join per card); the review that writes the card now
writes its rating beside it. Existing cards take the rating of their newest log (the
largest id: logs are only appended); a card without a log keeps NULL, which counts as
recalled, as before.

last_review moves to the index's second place: a class's cards are read as `learner = ? AND
last_review IS NOT NULL`, which then matches two of its columns, and SQLite's planner (which
does not count the generated stability as held by an index) stops preferring the narrower
(learner, due) index, which made it parse every card's JSON.

Revision ID: classes_0012
Revises: classes_0011
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "classes_0012"
down_revision: str | None = "classes_0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_RECALL_INDEX = "ix_review_cards_learner_recall"


def upgrade() -> None:
    op.add_column("review_cards", sa.Column("last_rating", sa.Integer(), nullable=True))
    op.execute("UPDATE review_cards SET last_rating = (SELECT l.rating FROM review_logs l "
               "WHERE l.card_id = review_cards.id ORDER BY l.id DESC LIMIT 1)")
    op.drop_index(_RECALL_INDEX, table_name="review_cards")
    op.create_index(_RECALL_INDEX, "review_cards",
                    ["learner_id", "last_review", "question_id", "stability", "last_rating"])


def downgrade() -> None:
    op.drop_index(_RECALL_INDEX, table_name="review_cards")
    op.create_index(_RECALL_INDEX, "review_cards",
                    ["learner_id", "question_id", "last_review", "stability"])
    op.drop_column("review_cards", "last_rating")
