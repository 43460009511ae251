"""Engine and sessions: SQLite with WAL, foreign keys and a busy timeout, or PostgreSQL.

Making an engine or a session factory registers every model (see register_models).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, DateTime, Engine, MetaData, create_engine, event
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker
from sqlalchemy.types import TypeDecorator

# How long a writer waits for a writer of another process (a `ddpdrill worker`, a bank
# import from the command line) before SQLite says "database is locked" (a request then
# gets 503 and Retry-After): long enough for an import's transaction, short enough that a
# stuck writer shows up as an error rather than a hung page.
SQLITE_BUSY_TIMEOUT_MS = 10_000
# Execution option of a read-only session: its transaction starts deferred, so it
# takes no write lock (see read_sessionmaker).
READ_ONLY = "ddpdrill_read_only"
# Connections a PostgreSQL engine keeps beyond the request threads: the
# in-process workers' claims and lease renewals, /healthz and the CLI.
PG_POOL_SPARE = 8
# A request that cannot get a connection within this long is told to retry (503).
POOL_TIMEOUT_S = 5.0

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on both SQLite (which drops tzinfo) and PostgreSQL."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map = {datetime: UTCDateTime(), dict[str, Any]: JSON, list[Any]: JSON}


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def register_models() -> None:
    """Import every model (the list is app.models), so the metadata knows every table.

    A foreign key or relationship to a model nobody imported fails only when it is
    first used ("NoReferencedTableError: ... users"), and which models happen to be
    imported depends on the entry point: a CLI command that touched one domain
    crashed where the web app, which imports all of them, did not. Every engine and
    session factory is made here, so calling this from both covers every entry point.
    Imported lazily because app.models imports the models, which import this module.
    """
    import app.models  # noqa: F401


def make_engine(url: str, *, pool_size: int = 40) -> Engine:
    """An engine for the URL, with SQLite's pragmas applied to every connection.

    `pool_size` is the number of request threads that may use the database at
    once (see docs/configuration.md): the pool never makes one of them wait.
    """
    register_models()
    if url.startswith("sqlite"):
        engine = create_engine(
            url, connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
            pool_size=pool_size, max_overflow=PG_POOL_SPARE, pool_timeout=POOL_TIMEOUT_S,
        )
        event.listen(engine, "connect", _sqlite_pragmas)

        @event.listens_for(engine, "connect")
        def _no_autobegin(dbapi_connection: Any, _record: Any) -> None:
            # SQLAlchemy, not the sqlite3 module, decides when a transaction begins (below).
            dbapi_connection.isolation_level = None

        # A deferred transaction that reads and then writes fails with SQLITE_BUSY when
        # another connection wrote in between, and the busy timeout cannot help. So a
        # session that may write begins IMMEDIATE, taking the write lock up front (WAL
        # readers are not blocked by it); a read-only session begins deferred and takes no
        # lock. Within one web process writers take turns before that (deps.get_session's
        # write slots), so SQLite's own busy wait is only ever between processes.
        @event.listens_for(engine, "begin")
        def _begin(conn: Any) -> None:
            read_only = conn.get_execution_options().get(READ_ONLY)
            conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")

        return engine
    # No pool_pre_ping: it cost every request an extra round trip (a sixth of an answer's
    # throughput on PostgreSQL). A connection the server dropped (a restart) fails its
    # request instead; SQLAlchemy then discards every older pooled connection, the app
    # answers 503 with Retry-After, and the retry gets a new one.
    return create_engine(url, pool_size=pool_size + PG_POOL_SPARE,
                         max_overflow=0, pool_timeout=POOL_TIMEOUT_S)


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    register_models()
    return sessionmaker(bind=engine, expire_on_commit=False)


def read_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    """Sessions for requests that only read: on SQLite they take no write lock."""
    return sessionmaker(bind=engine.execution_options(**{READ_ONLY: True}), expire_on_commit=False)


@contextmanager
def session_scope(factory: sessionmaker[Session]) -> Iterator[Session]:
    """One transaction: committed on success, rolled back on any error."""
    session = factory()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()
