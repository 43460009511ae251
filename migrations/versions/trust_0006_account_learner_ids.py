"""Account learner identities get ids of their own, never found in a cookie.

Before, signing up kept the browser's anonymous id as the account's learner id, so a copy
of that cookie read and wrote the account. Each account's learner rows move to a new id;
the old id is left naming nothing.

Revision ID: trust_0006
Revises: learn_b_0005
"""
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision: str = "trust_0006"
down_revision: str | None = "learn_b_0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Every table with a learner_id column, as of this revision.
OWNED = ("attempts", "quizzes", "review_cards", "review_logs", "problem_reports",
         "mock_interviews", "learner_goals")


def upgrade() -> None:
    conn = op.get_bind()
    claimed = conn.execute(sa.text("SELECT id, user_id FROM learners WHERE user_id IS NOT NULL")).all()
    for old, user_id in claimed:
        new = str(uuid.uuid4())
        conn.execute(sa.text("INSERT INTO learners (id, user_id, created_at) VALUES (:id, :u, :t)"),
                     {"id": new, "u": user_id, "t": datetime.now(UTC)})
        for table in OWNED:
            conn.execute(sa.text(f"UPDATE {table} SET learner_id = :new WHERE learner_id = :old"),
                         {"new": new, "old": old})
        conn.execute(sa.text("UPDATE runs SET requested_by = :new WHERE requested_by = :old"),
                     {"new": f"learner:{new}", "old": f"learner:{old}"})
        conn.execute(sa.text("DELETE FROM learners WHERE id = :old"), {"old": old})


def downgrade() -> None:
    # The old ids were the leak; there is nothing to restore.
    pass
