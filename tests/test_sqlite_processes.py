"""Several processes on one SQLite file (`serve --processes N`, `ddpdrill worker`): their
writers take turns through a file lock, and a run queued by one wakes the others' workers."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from app import db as app_db
from app.db import make_engine, make_sessionmaker, read_sessionmaker
from app.wake import WakeSocket, wake_all, wake_folder

# Exits 0 if it got the writer file's lock at once, 3 if another process holds it.
TRY_LOCK = textwrap.dedent("""
    import fcntl, os, sys
    fd = os.open(sys.argv[1], os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        sys.exit(3)
""")


def _other_process_gets_lock(path: Path) -> bool:
    result = subprocess.run([sys.executable, "-c", TRY_LOCK, str(path)], check=False)
    assert result.returncode in (0, 3)
    return result.returncode == 0


def test_a_write_transaction_holds_the_files_writer_lock_until_it_ends(tmp_path: Path) -> None:
    db = tmp_path / "drill.db"
    engine = make_engine(f"sqlite:///{db}")
    lock_file = Path(f"{db}-writer")
    try:
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE t (n INTEGER)"))
        assert lock_file.exists()

        write = make_sessionmaker(engine)()
        write.execute(text("INSERT INTO t VALUES (1)"))
        assert not _other_process_gets_lock(lock_file)
        write.commit()
        assert _other_process_gets_lock(lock_file)

        write.execute(text("INSERT INTO t VALUES (2)"))
        write.rollback()
        assert _other_process_gets_lock(lock_file)
        write.close()

        # A request that only reads takes no writer lock, in this process or across them.
        read = read_sessionmaker(engine)()
        assert read.execute(text("SELECT count(*) FROM t")).scalar() == 1
        assert _other_process_gets_lock(lock_file)
        read.close()
    finally:
        engine.dispose()


WRITER = textwrap.dedent("""
    import sys
    from sqlalchemy import text
    from app.db import make_engine, make_sessionmaker, session_scope
    engine = make_engine(sys.argv[1])
    factory = make_sessionmaker(engine)
    for i in range(int(sys.argv[3])):
        with session_scope(factory) as s:
            # Read, then write: without the lock up front, the other process's commit in
            # between makes SQLite refuse this write (SQLITE_BUSY_SNAPSHOT).
            n = s.execute(text("SELECT count(*) FROM t")).scalar()
            s.execute(text("INSERT INTO t VALUES (:who, :i, :n)"),
                      {"who": sys.argv[2], "i": i, "n": n})
""")


def test_two_processes_writing_one_file_at_once_lose_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'drill.db'}"
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE t (who TEXT, i INTEGER, seen INTEGER)"))
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, url, who, "300"],
                              stderr=subprocess.PIPE, text=True) for who in ("a", "b")]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT who, i, seen FROM t")).all()
    engine.dispose()
    assert sorted((who, i) for who, i, _ in rows) == sorted(
        (who, i) for who in ("a", "b") for i in range(300))
    # Each transaction saw every row committed before it: the counts are 0..599, once each.
    assert sorted(seen for _, _, seen in rows) == list(range(600))


def test_a_datagram_wakes_every_pool_on_the_file_and_a_dead_ones_socket_is_removed(
        tmp_path: Path) -> None:
    folder = wake_folder(f"sqlite:///{tmp_path / 'drill.db'}")
    assert folder == Path(f"{tmp_path / 'drill.db'}-wake")
    woken = [threading.Event(), threading.Event()]
    listeners = [WakeSocket(folder, event) for event in woken]
    # A process killed outright leaves its socket file behind, bound by nobody.
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    dead.bind(str(folder / "12345-dead"))
    dead.close()
    try:
        wake_all(folder)
        assert all(event.wait(5) for event in woken)
        assert sorted(p.name for p in folder.iterdir()) == sorted(w.path.name for w in listeners)
    finally:
        for listener in listeners:
            listener.close()
    assert list(folder.iterdir()) == []
    wake_all(folder)  # nobody listening: nothing to do, no error
    wake_all(tmp_path / "no-such-folder")


def test_only_sqlite_files_have_a_wake_folder() -> None:
    assert wake_folder("postgresql+psycopg://postgres@127.0.0.1:5432/test") is None
    assert wake_folder("sqlite://") is None
    assert wake_folder("sqlite:///:memory:") is None



def test_a_writer_file_that_cannot_be_opened_leaves_reading_working(tmp_path: Path) -> None:
    """E.g. a folder the server may not write in (simulated: root may write anywhere)."""
    db = tmp_path / "drill.db"
    engine = make_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE t (n INTEGER)"))
        conn.execute(text("INSERT INTO t VALUES (7)"))
    engine.dispose()
    Path(f"{db}-writer").unlink()
    Path(f"{db}-writer").mkdir()  # opening it for writing fails, whoever we are
    engine = make_engine(f"sqlite:///{db}")
    read = read_sessionmaker(engine)()
    assert read.execute(text("SELECT n FROM t")).scalar() == 7
    read.close()
    engine.dispose()


def test_two_engines_on_one_file_share_the_writer_lock_so_one_thread_cannot_deadlock(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread writing through one engine that then writes through another (a test's
    engine beside the app's) is told the database is locked, after the writer wait; with a
    lock per engine it waited forever for the file lock its own first connection held."""
    monkeypatch.setattr(app_db, "SQLITE_WRITER_WAIT_S", 0.2)
    url = f"sqlite:///{tmp_path / 'drill.db'}"
    first, second = make_engine(url), make_engine(url)
    try:
        with first.begin() as conn:
            conn.execute(text("CREATE TABLE t (n INTEGER)"))
        holder = make_sessionmaker(first)()
        holder.execute(text("INSERT INTO t VALUES (1)"))
        other = make_sessionmaker(second)()
        # Raised by the engine's begin hook, before SQLAlchemy wraps driver errors (the app
        # answers either with 503, main.database_busy).
        with pytest.raises((OperationalError, sqlite3.OperationalError), match="database is locked"):
            other.execute(text("INSERT INTO t VALUES (2)"))
        other.close()
        holder.commit()
        holder.close()
        with make_sessionmaker(second)() as again:  # free again once the first committed
            again.execute(text("INSERT INTO t VALUES (3)"))
            again.commit()
    finally:
        first.dispose()
        second.dispose()
