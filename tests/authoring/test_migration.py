"""Migration 0002: adds the authoring columns and tables, and comes off again, without losing data."""

from __future__ import annotations

from alembic import command
from sqlalchemy import create_engine, inspect, text

from app.migrate import alembic_config, upgrade


def test_0002_goes_up_and_down_keeping_questions_and_revisions(fresh_url: str) -> None:
    upgrade(fresh_url, "0001")
    engine = create_engine(fresh_url)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO topics (slug, title, description, position) "
                          "VALUES ('t', 'T', '', 1)"))
        conn.execute(text(
            "INSERT INTO questions (id, slug, status, topic, title, difficulty, type, tags, "
            "has_snippet, created_at, updated_at) VALUES (1, 'q', 'published', 't', 'Q', 1, "
            "'single', '[]', false, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"))
        conn.execute(text(
            "INSERT INTO question_revisions (id, question_id, number, content, content_hash, "
            "source, note, created_at) VALUES (1, 1, 1, '{}', 'h', 'import', '', CURRENT_TIMESTAMP)"))
        conn.execute(text("UPDATE questions SET current_revision_id = 1"))
    upgrade(fresh_url)
    inspector = inspect(engine)
    assert "draft_revision_id" in {c["name"] for c in inspector.get_columns("questions")}
    assert "session_version" in {c["name"] for c in inspector.get_columns("users")}
    assert {"rate_hits", "bank_uploads"} <= set(inspector.get_table_names())
    with engine.begin() as conn:
        conn.execute(text("UPDATE questions SET draft_revision_id = 1"))
    command.downgrade(alembic_config(fresh_url), "0001")
    with engine.connect() as conn:
        # SQLite must not have rebuilt (and so cascaded into) the questions table.
        assert conn.execute(text("SELECT count(*) FROM question_revisions")).scalar() == 1
        assert conn.execute(text("SELECT current_revision_id FROM questions")).scalar() == 1
    assert "draft_revision_id" not in {c["name"] for c in inspect(engine).get_columns("questions")}
    upgrade(fresh_url)
    engine.dispose()
