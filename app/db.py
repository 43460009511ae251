"""Engine and sessions: SQLite with WAL, foreign keys and a busy timeout, or PostgreSQL.

Making an engine or a session factory registers every model (see register_models).
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, DateTime, Engine, MetaData, create_engine, event
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker
from sqlalchemy.types import TypeDecorator

# Long enough for a writer to finish a bank import; short enough that a stuck
# writer shows up as an error rather than a hung page. This is the wait for a
# writer in another process (a `ddpdrill worker`, the CLI); writers in this
# process queue on SQLiteWriterLock instead, which hands over at once rather
# than sleeping in SQLite's busy handler.
SQLITE_BUSY_TIMEOUT_MS = 15_000
# A request waits this long for this process's SQLite writer before it is told
# to retry (503), instead of piling up behind a stuck writer.
SQLITE_WRITER_WAIT_S = 5.0
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


class SQLiteConnection(sqlite3.Connection):
    """A connection that holds its engine's writer lock from its first write to commit or rollback.

    SQLite lets one connection write at a time. Threads of one process that wait
    in SQLite's busy handler sleep in growing steps (up to 100 ms) and wake in no
    order; waiting on a Python lock hands the database over the moment the
    writer commits. Between processes (`serve --processes N`, `ddpdrill worker`) the
    same goes for a file lock (flock on `<database>-writer`), taken after the
    process's own lock, so at most one thread per process waits for it: with SQLite's
    busy handler between two web processes, answers' p99 was ~1 s, with the file lock
    ~180 ms (docs/performance.md). A process that dies holding it lets go with it.
    """

    writer_lock: threading.Lock
    # An open file beside the database: its flock is the writer lock between processes.
    writer_file: int | None = None
    holds_writer_lock = False

    def acquire_writer(self) -> None:
        if self.holds_writer_lock:
            return
        if not self.writer_lock.acquire(timeout=SQLITE_WRITER_WAIT_S):
            raise sqlite3.OperationalError("database is locked (waited for this process's writer)")
        if self.writer_file is not None:
            try:
                fcntl.flock(self.writer_file, fcntl.LOCK_EX)
            except BaseException:
                self.writer_lock.release()
                raise
        self.holds_writer_lock = True

    def _unlock(self) -> None:
        self.holds_writer_lock = False
        if self.writer_file is not None:
            fcntl.flock(self.writer_file, fcntl.LOCK_UN)
        self.writer_lock.release()

    def release_writer(self) -> None:
        if self.holds_writer_lock and not self.in_transaction:
            self._unlock()

    def commit(self) -> None:
        try:
            super().commit()
        finally:
            self.release_writer()

    def rollback(self) -> None:
        try:
            super().rollback()
        finally:
            self.release_writer()

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self.holds_writer_lock:
                self._unlock()
            if self.writer_file is not None:
                os.close(self.writer_file)
                self.writer_file = None


_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")

# One writer lock per database file per process, whatever the number of engines on it.
# The file lock is then only ever waited for across processes, where its holder always
# lets go; two engines with locks of their own could deadlock one thread that writes
# through both (the second waits forever for the first's file lock, held by itself).
_FILE_WRITER_LOCKS: dict[str, threading.Lock] = {}
_FILE_WRITER_LOCKS_GUARD = threading.Lock()


def _process_writer_lock(database: str) -> threading.Lock:
    key = os.path.realpath(database)
    with _FILE_WRITER_LOCKS_GUARD:
        return _FILE_WRITER_LOCKS.setdefault(key, threading.Lock())


def make_engine(url: str, *, pool_size: int = 40) -> Engine:
    """An engine for the URL, with SQLite's pragmas applied to every connection.

    `pool_size` is the number of request threads that may use the database at
    once (see docs/configuration.md): the pool never makes one of them wait.
    """
    register_models()
    if url.startswith("sqlite"):
        engine = create_engine(
            url, connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000,
                               "factory": SQLiteConnection},
            pool_size=pool_size, max_overflow=PG_POOL_SPARE, pool_timeout=POOL_TIMEOUT_S,
        )
        event.listen(engine, "connect", _sqlite_pragmas)
        database = engine.url.database or ""
        shared_file = database not in ("", ":memory:") and not database.startswith("file:")
        writer_lock = _process_writer_lock(database) if shared_file else threading.Lock()

        @event.listens_for(engine, "connect")
        def _no_autobegin(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.isolation_level = None
            dbapi_connection.writer_lock = writer_lock
            if shared_file:
                try:
                    dbapi_connection.writer_file = os.open(f"{database}-writer",
                                                           os.O_RDWR | os.O_CREAT, 0o600)
                except OSError:  # a folder we may not write in: reading works, writing fails anyway
                    dbapi_connection.writer_file = None

        # A deferred transaction that reads and then writes fails with
        # SQLITE_BUSY when another connection wrote in between, and the busy
        # timeout cannot help. So a session that may write begins IMMEDIATE,
        # taking the write lock up front (WAL readers are not blocked by it);
        # a read-only session (GET requests) begins deferred and takes no lock.
        @event.listens_for(engine, "begin")
        def _begin(conn: Any) -> None:
            if conn.get_execution_options().get(READ_ONLY):
                conn.exec_driver_sql("BEGIN")
                return
            dbapi_connection = conn.connection.dbapi_connection
            dbapi_connection.acquire_writer()
            try:
                conn.exec_driver_sql("BEGIN IMMEDIATE")
            except BaseException:
                dbapi_connection.release_writer()
                raise

        # A read-only session that writes after all (a page that records when it
        # was first shown) queues on the writer lock like everyone else; if another
        # writer committed since it began reading, SQLite refuses the write and the
        # request is answered 503 (retry), never with stale data.
        @event.listens_for(engine, "before_cursor_execute")
        def _write_in_read(conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
            if conn.get_execution_options().get(READ_ONLY) and \
                    statement.lstrip()[:7].upper().startswith(_WRITES):
                conn.connection.dbapi_connection.acquire_writer()

        return engine
    # No pool_pre_ping: it cost every request an extra round trip (a sixth of an answer's
    # throughput on PostgreSQL). A connection the server dropped (a restart) fails its
    # request instead; SQLAlchemy then discards every older pooled connection, the app
    # answers 503 with Retry-After (main.database_busy), and the retry gets a new one.
    return create_engine(url, pool_size=pool_size + PG_POOL_SPARE,
                         max_overflow=0, pool_timeout=POOL_TIMEOUT_S)


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    register_models()
    return sessionmaker(bind=engine, expire_on_commit=False)


def read_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    """Sessions for requests that only read: on SQLite they take no write lock."""
    return sessionmaker(bind=engine.execution_options(**{READ_ONLY: True}), expire_on_commit=False)


# Where a request's sessions are kept: its ASGI scope's "state" (request.state).
REQUEST_SESSIONS = "db_sessions"


class RequestSessions:
    """The database sessions of one request, each made when first asked for, in the thread
    that asks: one that may write, one that only reads (on SQLite it takes no write lock).

    The event loop makes none: a view's sessions are made in its own pool thread
    (deps.commit_when_done), which spared every request two hand-offs to a pool thread
    and one dependency for FastAPI to resolve (docs/performance.md).
    """

    def __init__(self, write: sessionmaker[Session], read: sessionmaker[Session]) -> None:
        self._factories = {True: write, False: read}
        self._made: dict[bool, Session] = {}

    def get(self, *, write: bool) -> Session:
        session = self._made.get(write)
        if session is None:
            session = self._made[write] = self._factories[write]()
        return session

    @property
    def open(self) -> bool:
        return bool(self._made)

    def commit(self) -> None:
        for session in self._made.values():
            if session.in_transaction():
                session.commit()

    def close(self) -> None:
        """Close every session (rolling back an open transaction); a later get() makes a new one."""
        made, self._made = self._made, {}
        for session in made.values():
            session.close()


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
