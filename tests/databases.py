"""The databases every database test runs on: a real SQLite file, and PostgreSQL when
DDPDRILL_TEST_DATABASE_URL is set (CI sets it), each test session (each xdist worker) in a
database of its own on that server, and a test that needs an empty one in a schema of its own."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote

import pytest
from sqlalchemy import Engine, create_engine, make_url, text

PG_ENV = "DDPDRILL_TEST_DATABASE_URL"

# A test whose subject is the verify engine (gloo runs, the learner's sandbox) or a fit's
# arithmetic, and whose database only holds its rows, runs on SQLite alone: the same runs
# again on PostgreSQL prove nothing more. Storage, queue, concurrency, access and visibility
# tests run on both. (A test's own parametrization of a fixture takes precedence over the
# fixture's params.)
ONE_DATABASE = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def backends() -> list[str]:
    return ["sqlite", "postgresql"] if os.environ.get(PG_ENV) else ["sqlite"]


def _pg_schema_url(base_url: str, schema: str) -> str:
    sep = "&" if "?" in base_url else "?"
    return f"{base_url}{sep}options={quote(f'-csearch_path={schema}')}"


@contextmanager
def scratch_pg_schema(prefix: str) -> Iterator[str]:
    """A URL for a fresh, empty PostgreSQL schema (DDPDRILL_TEST_DATABASE_URL), dropped after."""
    base = os.environ[PG_ENV]
    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base)
    try:
        with admin.begin() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    except Exception as exc:  # CI must not silently skip PostgreSQL
        pytest.fail(f"PostgreSQL at {base} is unreachable: {exc}")
    try:
        yield _pg_schema_url(base, schema)
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def empty(engine: Engine) -> None:
    """Delete every row of every table (a test's few rows: DELETE takes milliseconds where
    PostgreSQL's TRUNCATE of every table takes ~0.2 s, which added up to most of the suite)."""
    from app.db import Base

    with engine.begin() as conn:
        # questions.current_revision_id and question_revisions.question_id point at each
        # other; break that cycle first, since both databases check foreign keys.
        conn.execute(text("UPDATE questions SET current_revision_id = NULL"))
        for table in reversed(Base.metadata.sorted_tables):
            conn.execute(table.delete())


@contextmanager
def scratch_pg_database(prefix: str) -> Iterator[str]:
    """A URL for a fresh, empty PostgreSQL database on DDPDRILL_TEST_DATABASE_URL's server,
    dropped after. A database rather than a schema: NOTIFY reaches every listener of a
    database, so only one's own keeps other test sessions' runs (other xdist workers, other
    developers) from waking this session's workers."""
    base = os.environ[PG_ENV]
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:  # CI must not silently skip PostgreSQL
        admin.dispose()
        pytest.fail(f"PostgreSQL at {base} is unreachable: {exc}")
    try:
        yield make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
