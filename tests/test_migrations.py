"""The migrations build exactly the schema the models describe, on both databases."""

from __future__ import annotations

from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Engine, inspect

from app.db import Base


def _fk_shape(fk: Any) -> tuple[str, tuple[str, ...], str]:
    return (fk.table.name, tuple(c.name for c in fk.columns), fk.referred_table.name)


def test_migrated_schema_matches_the_models(db_engine: Engine) -> None:
    with db_engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    if db_engine.dialect.name == "sqlite":
        # SQLite cannot add a constraint to a table, so 0002 adds draft_revision_id with an
        # inline REFERENCES clause, whose constraint name SQLite does not report back:
        # the same foreign key then shows up as removed (unnamed) and added (named).
        removed = {_fk_shape(d[1]) for d in diff if d[0] == "remove_fk"}
        added = {_fk_shape(d[1]) for d in diff if d[0] == "add_fk"}
        diff = [d for d in diff
                if not (d[0] in ("remove_fk", "add_fk") and _fk_shape(d[1]) in removed & added)]
    assert diff == []


def test_question_to_current_revision_foreign_key_exists(db_engine: Engine) -> None:
    fks = {fk["name"]: fk for fk in inspect(db_engine).get_foreign_keys("questions")}
    fk = fks["fk_questions_current_revision"]
    assert fk["referred_table"] == "question_revisions"
    assert fk["options"].get("ondelete") == "SET NULL"
