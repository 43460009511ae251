"""`ddpdrill serve` and `ddpdrill worker`: the web app, and verify workers on their own."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import threading
from typing import Annotated, Any

import typer
from sqlalchemy import func, select

from app.cli.bank import import_directory
from app.cli.common import (
    db_session,
    err,
    migrate_default,
    out,
    running_workers,
    settings_for_command,
)
from app.settings import Settings, get_settings

# Exit status when `serve --processes N` is asked of SQLite.
USAGE_ERROR = 2


def prepare(settings: Settings) -> None:
    """Before serving: migrate the default database, and import the bank folder when the
    database has no question yet (DDPDRILL_LOAD_BANK_ON_START)."""
    from app.questions.models import Question

    migrate_default(settings)
    if not settings.load_bank_on_start:
        return
    with db_session(settings) as session:
        count = session.scalar(select(func.count()).select_from(Question))
    if count == 0 and settings.bank_dir.is_dir() and import_directory(settings, settings.bank_dir) != 0:
        raise typer.Exit(1)


def serve(
    host: Annotated[str | None, typer.Option(help="Address to listen on.")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on.")] = None,
    processes: Annotated[int | None, typer.Option(
        min=1, max=64, help="Web processes on the one port (PostgreSQL only when more than 1).")] = None,
) -> None:
    """Run the web app (and, by default, in-process verify workers)."""
    import uvicorn

    settings = get_settings()
    # The address given on the command line is the one links are built from (unless
    # DDPDRILL_PUBLIC_BASE_URL says otherwise), in this process and in its web processes.
    host, port = host or settings.host, port or settings.port
    settings = settings.model_copy(update={"host": host, "port": port})
    processes = processes or settings.processes
    if processes > 1 and not settings.resolved_database_url.startswith("postgresql"):
        # One process serves a class; several share a database only through a server that is
        # built for it. An SQLite file has one writer at a time, whatever the processes.
        err.print(f"--processes {processes} needs PostgreSQL (DDPDRILL_DATABASE_URL="
                  "postgresql+psycopg://...): on SQLite run one web process, which serves a "
                  "class (docs/deploy.md).")
        raise typer.Exit(USAGE_ERROR)
    prepare(settings)
    if processes == 1:
        from app.main import create_app

        out.print(f"DDP Drill on http://{host}:{port}")
        uvicorn.run(create_app(settings, freeze_heap=True), host=host, port=port, log_level="info",
                    **_proxy_options(settings))
        return
    # Several processes: uvicorn's own supervisor starts them (and restarts one that dies).
    # Each is the same stateless app with its own verify workers; they share the queue
    # through PostgreSQL (SKIP LOCKED claims, NOTIFY wake-ups). prometheus_client's
    # multiprocess mode adds up every process's figures on /metrics, whichever one a scrape
    # reaches; it reads its folder from the environment when first imported, in each child.
    settings.resolved_secret_key()  # one key for every process, made before they start
    metrics_dir = tempfile.mkdtemp(prefix="ddpdrill-metrics-")
    os.environ.update({"PROMETHEUS_MULTIPROC_DIR": metrics_dir, "DDPDRILL_HOST": host,
                       "DDPDRILL_PORT": str(port)})
    try:
        out.print(f"DDP Drill on http://{host}:{port} ({processes} web processes)")
        uvicorn.run("app.main:served_app", factory=True, host=host, port=port,
                    **_proxy_options(settings),
                    workers=processes, log_level="info")
    finally:
        shutil.rmtree(metrics_dir, ignore_errors=True)


def _proxy_options(settings: Settings) -> dict[str, Any]:
    """X-Forwarded-For is believed only from the proxies DDPDRILL_FORWARDED_ALLOW_IPS names:
    uvicorn's own default trusts it from 127.0.0.1, so any local client could claim any
    address and step around every per-address limit."""
    if not settings.forwarded_allow_ips:
        return {"proxy_headers": False}
    return {"proxy_headers": True, "forwarded_allow_ips": settings.forwarded_allow_ips}


def worker(
    concurrency: Annotated[int, typer.Option(min=1, max=8, help="Runs executed at once.")] = 1,
) -> None:
    """Run verify workers against the configured database until SIGTERM or Ctrl-C."""
    from app.verify.engine import sandbox_status

    settings = settings_for_command()
    stopping = threading.Event()
    received: list[int] = []

    # The handler only records the signal: printing from it re-enters a print the
    # main thread may be in the middle of ("reentrant call" on stdout's buffer).
    def _stop(signum: int, _frame: object) -> None:
        received.append(signum)
        stopping.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    state, message = sandbox_status(settings.sandbox)
    out.print(f"Sandbox {state}: {message}.")
    with running_workers(settings, concurrency, stop_timeout=None):
        out.print(f"{concurrency} worker(s) waiting for runs.")
        while not stopping.wait(0.5):
            pass
        out.print(f"Signal {received[0]}: finishing the runs in hand, then stopping.")
    out.print("Workers stopped.")
    sys.stdout.flush()
