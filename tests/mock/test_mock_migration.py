"""Migration learn_b_0005 (mock interviews, interview goals) goes down and up again on both
databases, each on a database of its own."""

from __future__ import annotations

from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect

from app.migrate import alembic_config, upgrade

TABLES = {"mock_interviews", "learner_goals"}


def _tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_mock_interview_migration_downgrades_and_upgrades_again(fresh_url: str) -> None:
    upgrade(fresh_url)
    assert _tables(fresh_url) >= TABLES
    cfg = alembic_config(fresh_url)
    below = ScriptDirectory.from_config(cfg).get_revision("learn_b_0005").down_revision
    command.downgrade(cfg, str(below))
    assert not TABLES & _tables(fresh_url)
    assert "review_cards" in _tables(fresh_url)  # learn-a's tables stay
    upgrade(fresh_url)
    assert _tables(fresh_url) >= TABLES
