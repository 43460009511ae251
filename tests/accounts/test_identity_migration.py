"""Migration trust_0006: an account whose learner id was the browser's cookie id (sign-up
before the fix) gets a new id, with its rows, so the old cookie names nothing."""

from __future__ import annotations

from datetime import UTC, datetime

from alembic import command
from sqlalchemy import create_engine, text

from app.migrate import alembic_config, upgrade

OLD = "11111111-1111-4111-8111-111111111111"


def test_accounts_learner_ids_move_off_the_cookie_id(fresh_url: str) -> None:
    cfg = alembic_config(fresh_url)
    command.upgrade(cfg, "learn_b_0005")
    engine = create_engine(fresh_url)
    now = datetime.now(UTC)
    try:
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO users (username, password_hash, role, active, "
                              "session_version, created_at) VALUES ('lena', 'x', 'learner', true, 1, :t)"),
                         {"t": now})
            uid = conn.execute(text("SELECT id FROM users")).scalar_one()
            conn.execute(text("INSERT INTO learners (id, user_id, created_at) VALUES (:id, :u, :t)"),
                         {"id": OLD, "u": uid, "t": now})
            conn.execute(text("INSERT INTO learner_goals (learner_id, target, updated_at) "
                              "VALUES (:id, 0.9, :t)"), {"id": OLD, "t": now})
        upgrade(fresh_url)
        with engine.begin() as conn:
            assert conn.execute(text("SELECT count(*) FROM learners WHERE id = :id"),
                                {"id": OLD}).scalar_one() == 0
            new = conn.execute(text("SELECT id FROM learners WHERE user_id = :u"), {"u": uid}).scalar_one()
            assert new != OLD
            assert conn.execute(text("SELECT learner_id FROM learner_goals")).scalar_one() == new
    finally:
        engine.dispose()
