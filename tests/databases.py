"""The databases every database test runs on: a real SQLite file, and PostgreSQL when
DDPDRILL_TEST_DATABASE_URL is set (CI sets it), each test session in a schema of its own."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote

import pytest
from sqlalchemy import create_engine, text

PG_ENV = "DDPDRILL_TEST_DATABASE_URL"


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
