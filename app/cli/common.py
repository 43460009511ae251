"""What every `ddpdrill` command shares: the consoles, a transaction on the configured
database, migrating the embedded default, printing a bank's errors, and verify workers."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import typer
from rich.console import Console
from rich.markup import escape
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from app.db import make_engine, make_sessionmaker, session_scope
from app.settings import Settings, get_settings

out = Console()
err = Console(stderr=True)


def migrate_default(settings: Settings) -> None:
    """Migrate the embedded default database: the SQLite file in the data dir is the app's own
    and migrates itself; a configured database is the operator's, upgraded with
    `ddpdrill db upgrade`. One that is not at the latest revision stops the command with a
    message saying so (exit status 2), not a traceback from its first missing table."""
    from app.migrate import behind, upgrade

    url = settings.resolved_database_url
    if settings.uses_default_database:
        upgrade(url)
        return
    shown = make_url(url).render_as_string(hide_password=True)
    try:
        lag = behind(url)
    except SQLAlchemyError as exc:
        reason = (str(getattr(exc, "orig", None) or exc).strip().splitlines() or [""])[0]
        err.print(f"[red]error[/red] cannot reach the database at {escape(shown)}: "
                  f"{escape(reason)}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    if lag is not None:
        current, heads = lag
        at = ", ".join(sorted(current)) if current else "no schema yet"
        err.print(f"[red]error[/red] the database at {escape(shown)} is not migrated ({at}; "
                  f"the app needs {', '.join(sorted(heads))}): run `ddpdrill db upgrade` first",
                  highlight=False, soft_wrap=True)
        raise typer.Exit(2)


def settings_for_command() -> Settings:
    """The settings, with the default database migrated: where every command that touches
    the database starts."""
    settings = get_settings()
    migrate_default(settings)
    return settings


@contextmanager
def db_session(settings: Settings) -> Iterator[Session]:
    """One transaction on the configured database, for a command."""
    engine = make_engine(settings.resolved_database_url)
    try:
        with session_scope(make_sessionmaker(engine)) as session:
            yield session
    finally:
        engine.dispose()


def print_errors(errors: Iterable[object]) -> int:
    """Print bank-file errors one per line (greppable, markup escaped); how many there were."""
    n = 0
    for error in errors:
        # Escaped: "[field]" is not rich markup. Unwrapped: one error per line.
        err.print(f"[red]error[/red] {escape(str(error))}", highlight=False, soft_wrap=True)
        n += 1
    return n


@contextmanager
def running_workers(settings: Settings, count: int, stop_timeout: float | None) -> Iterator[None]:
    """`count` verify workers (and one fit worker: app/review/worker.py) in threads of this
    process, for as long as the block runs; on leaving it they finish (or, after
    `stop_timeout`, hand back) the jobs in hand."""
    from app.review.worker import FitWorker
    from app.verify.engine import get_engine
    from app.verify.worker import WorkerPool, warm_engine

    engine = make_engine(settings.resolved_database_url)
    pool = WorkerPool(make_sessionmaker(engine), settings, count)
    # Start the rank pool now, so the first run (perhaps one a dead worker left behind)
    # does not also wait for torch to import.
    threading.Thread(target=warm_engine, args=(settings.sandbox,), name="engine-warmup",
                     daemon=True).start()
    pool.start()
    fits = FitWorker(pool.factory, settings)
    fits.start()
    try:
        yield
    finally:
        pool.shutdown(timeout=stop_timeout)
        fits.shutdown(timeout=stop_timeout)
        engine.dispose()
        get_engine(sandbox=settings.sandbox).close()
