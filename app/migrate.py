"""Applying Alembic migrations from code (`ddpdrill db upgrade`, `serve`, tests)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"


def alembic_config(url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    """Bring the database at url up to the given revision."""
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    command.upgrade(alembic_config(url), revision)


def behind(url: str) -> tuple[set[str], set[str]] | None:
    """(the database's revisions, the app's) when the database at url is not at the latest
    revision (an empty set: no schema at all); None when it is."""
    heads = set(ScriptDirectory.from_config(alembic_config(url)).get_heads())
    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).exists():
        return set(), heads  # connecting would create an empty file
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            current = set(MigrationContext.configure(conn).get_current_heads())
    finally:
        engine.dispose()
    return None if current == heads else (current, heads)
