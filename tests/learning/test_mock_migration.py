"""Migration learn_b_0005 (mock interviews, interview goals) goes down and up again on both
databases, each on a database of its own."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect, text

from app.migrate import alembic_config, upgrade
from tests.conftest import PG_ENV

TABLES = {"mock_interviews", "learner_goals"}


@pytest.fixture(params=["sqlite", "postgresql"])
def fresh_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'm.db'}"
        return
    base = os.environ.get(PG_ENV)
    if not base:
        pytest.skip(f"{PG_ENV} is not set")
    schema = f"m_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    yield f"{base}{'&' if '?' in base else '?'}options={quote(f'-csearch_path={schema}')}"
    with admin.begin() as conn:
        conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    admin.dispose()


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
