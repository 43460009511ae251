"""The `ddpdrill` command."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db import make_engine, make_sessionmaker, session_scope
from app.questions.bank import load_bank, write_bank
from app.questions.models import Question
from app.questions.service import export_bank, import_bank
from app.settings import Settings, get_settings
from app.verify.cli import verify_command

app = typer.Typer(help="DDP Drill: practise PyTorch distributed-training questions.",
                  no_args_is_help=True, add_completion=False)
db_app = typer.Typer(help="Database migrations.", no_args_is_help=True)
bank_app = typer.Typer(help="The question bank as files.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(bank_app, name="bank")
admin_app = typer.Typer(help="Author and admin accounts.", no_args_is_help=True)
app.add_typer(admin_app, name="admin")
app.command("verify")(verify_command)

out = Console()
err = Console(stderr=True)


@contextmanager
def db_session(settings: Settings) -> Iterator[Session]:
    """One transaction on the configured database, for a command."""
    engine = make_engine(settings.resolved_database_url)
    try:
        with session_scope(make_sessionmaker(engine)) as session:
            yield session
    finally:
        engine.dispose()


def _upgrade(settings: Settings) -> None:
    from app.migrate import upgrade

    upgrade(settings.resolved_database_url)


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Apply every migration to the configured database."""
    _upgrade(get_settings())
    out.print("Database is at the latest revision.")


def _check(directory: Path) -> int:
    from app.questions.fairness import check_fairness

    bank = load_bank(directory)
    for error in bank.errors:
        # Escaped: "[field]" is not rich markup. Unwrapped: one error per line, greppable.
        err.print(f"[red]error[/red] {escape(str(error))}", highlight=False, soft_wrap=True)
    if bank.errors:
        err.print(f"{len(bank.errors)} error(s) in {directory}")
        return 1
    fairness = check_fairness(bank.questions)
    for finding in fairness.warnings:
        err.print(f"[yellow]warning[/yellow] {escape(str(finding))}", highlight=False, soft_wrap=True)
    for finding in fairness.errors:
        err.print(f"[red]error[/red] {escape(str(finding))}", highlight=False, soft_wrap=True)
    out.print(f"Fairness: {escape(fairness.summary())}.", highlight=False, soft_wrap=True)
    if fairness.errors:
        err.print(f"{len(fairness.errors)} bank-wide fairness error(s) in {directory}")
        return 1
    out.print(f"{len(bank.questions)} questions in {len(bank.topics)} topics: all valid"
              f" ({len(fairness.warnings)} fairness warning(s)).")
    return 0


BankDir = Annotated[Path | None, typer.Argument(help="Bank folder (default: DDPDRILL_BANK_DIR).")]


@bank_app.command("check")
def bank_check(directory: BankDir = None) -> None:
    """Validate the bank files and their fairness without touching the database."""
    raise typer.Exit(_check(directory or get_settings().bank_dir))


@bank_app.command("coverage")
def bank_coverage(
    directory: BankDir = None,
    output: Annotated[Path | None, typer.Option(
        help="File to write (default: docs/coverage.md beside the bank folder).")] = None,
    check: Annotated[bool, typer.Option(
        "--check", help="Write nothing; exit 1 if the file differs from what would be written.")] = False,
) -> None:
    """Generate docs/coverage.md from the bank's fact list and the facts its expectations measure."""
    from app.questions.facts import FACTS_FILE, default_coverage_path, render_coverage

    bank_dir = directory or get_settings().bank_dir
    bank = load_bank(bank_dir)
    for error in bank.errors:
        err.print(f"[red]error[/red] {escape(str(error))}", highlight=False, soft_wrap=True)
    if bank.errors:
        raise typer.Exit(1)
    if bank.facts is None:
        err.print(f"No {FACTS_FILE} in {bank_dir}.")
        raise typer.Exit(1)
    target = output or default_coverage_path(bank_dir)
    text = render_coverage(bank.facts, bank.questions)
    if check:
        current = target.read_text(encoding="utf-8") if target.is_file() else ""
        if current != text:
            err.print(f"{target} is stale: run `ddpdrill bank coverage`.")
            raise typer.Exit(1)
        out.print(f"{target} is up to date.")
        return
    target.write_text(text, encoding="utf-8")
    out.print(f"Wrote {target}.")


def import_directory(settings: Settings, directory: Path) -> int:
    """Validate, then import all of the bank in one transaction; 1 on any error."""
    bank = load_bank(directory)
    for error in bank.errors:
        # Escaped: "[field]" is not rich markup. Unwrapped: one error per line, greppable.
        err.print(f"[red]error[/red] {escape(str(error))}", highlight=False, soft_wrap=True)
    if bank.errors:
        err.print(f"{len(bank.errors)} error(s); nothing was imported.")
        return 1
    with db_session(settings) as session:
        report = import_bank(db_session=session, bank=bank)
    out.print(f"Imported {directory}: {report.summary()}.")
    # Learners' first Verify should be a cache hit: queue every audited combination
    # now, for `serve`'s worker or `ddpdrill worker` processes to run in the background.
    from app.verify.audit import queue_published

    engine = make_engine(settings.resolved_database_url)
    try:
        queued = queue_published(make_sessionmaker(engine))
    finally:
        engine.dispose()
    out.print(f"{queued} audited runs are cached or queued for the workers.")
    return 0


@bank_app.command("import")
def bank_import(directory: BankDir = None) -> None:
    """Import the bank: upsert by slug, new revisions for changes, retire missing files."""
    settings = get_settings()
    if settings.uses_default_database:
        _upgrade(settings)
    raise typer.Exit(import_directory(settings, directory or settings.bank_dir))


@bank_app.command("export")
def bank_export(directory: Annotated[Path, typer.Argument(help="Folder to write into.")]) -> None:
    """Write the current bank from the database as files that import back unchanged."""
    settings = get_settings()
    with db_session(settings) as session:
        docs, topics = export_bank(db_session=session)
    write_bank(directory, docs, topics)
    out.print(f"Wrote {len(docs)} questions in {len(topics)} topics to {directory}.")


@bank_app.command("verify")
def bank_verify(
    slug: Annotated[str | None, typer.Option(help="Audit only this question.")] = None,
    fresh: Annotated[bool, typer.Option("--fresh", help="Ignore cached runs; execute again.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the audit as JSON only.")] = False,
) -> None:
    """Run every question's expectations against torch; exit 1 if any answer key disagrees."""
    import json

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from app.verify.audit import audit_bank

    settings = get_settings()
    if settings.uses_default_database:
        _upgrade(settings)
    engine = make_engine(settings.resolved_database_url)
    factory = make_sessionmaker(engine)
    try:
        if as_json:
            audits = audit_bank(factory, settings, slug=slug, fresh=fresh)
        else:
            with Progress(TextColumn("Verifying runs"), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn(), console=err, transient=True) as progress:
                task = progress.add_task("runs", total=None)
                audits = audit_bank(
                    factory, settings, slug=slug, fresh=fresh,
                    on_progress=lambda done, total: progress.update(task, completed=done, total=total),
                )
    finally:
        engine.dispose()
    if slug and not audits:
        err.print(f"No question {slug!r} with a snippet.")
        raise typer.Exit(1)
    failed = [a for a in audits if not a.passed]
    if as_json:
        print(json.dumps([
            {"slug": a.slug, "passed": a.passed,
             "binding_problems": [{"loc": list(p.loc), "message": str(p)}
                                  for p in a.gate.binding_problems],
             "problems": a.gate.problems(),
             "combos": [
                {**c.to_json(), "status": c.run.status if c.run else None,
                 "outcome": c.result.outcome if c.result else None, "passed": c.passed}
                for c in a.gate.combos]}
            for a in audits], indent=2))
    else:
        table = Table(title="Answer keys against torch", show_lines=False)
        for col in ("question", "knobs", "check", "expected", "measured", "result"):
            table.add_column(col, overflow="fold")
        for a in audits:
            for p in a.gate.binding_problems:
                where = ".".join(str(part) for part in p.loc)
                table.add_row(a.slug, "—", "key binding", escape(where), escape(str(p)),
                              "[red]FAIL[/red]")
            for problem in a.gate.problems():
                table.add_row(a.slug, "—", "known-wrong solution", "fails a check somewhere",
                              escape(problem), "[red]FAIL[/red]")
            for c in a.gate.combos:
                knobs = ", ".join(f"{k}={v}" for k, v in c.params.items()) or "—"
                if c.role != "question":
                    # An exercise's starter and wrong solutions must fail a check: say so.
                    knobs = f"{c.role_label} ({c.state}): {knobs}"
                # Measured text (torch's error messages) may contain [brackets]: escape it.
                if c.failure:
                    table.add_row(a.slug, escape(knobs), "run", "a finished run", escape(c.failure),
                                  "[red]FAIL[/red]")
                for x in c.checks:
                    table.add_row(a.slug, escape(knobs), escape(x.label), escape(x.expected),
                                  escape(x.measured),
                                  "[green]pass[/green]" if x.passed else "[red]FAIL[/red]")
        out.print(table)
        combos = sum(len(a.gate.combos) for a in audits)
        out.print(f"{len(audits) - len(failed)}/{len(audits)} questions agree with torch "
                  f"({combos} knob combinations).")
    if failed:
        if not as_json:
            err.print("Disagree: " + ", ".join(a.slug for a in failed))
        raise typer.Exit(1)


@admin_app.command("create")
def admin_create(
    username: Annotated[str, typer.Argument(help="The new account's username.")],
    role: Annotated[str, typer.Option(help="author or admin.")] = "author",
    password_stdin: Annotated[bool, typer.Option(
        "--password-stdin", help="Read the password from the first line of stdin (for scripts).")] = False,
) -> None:
    """Create an author or admin account. The password is prompted for, never an argument."""
    from app.accounts.models import ROLES
    from app.accounts.service import AccountError, create_user

    if role not in ROLES:
        err.print(f"--role must be one of: {', '.join(ROLES)}")
        raise typer.Exit(2)
    if password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = typer.prompt("Password", hide_input=True, confirmation_prompt=True)
    settings = get_settings()
    if settings.uses_default_database:
        _upgrade(settings)
    try:
        with db_session(settings) as session:
            create_user(db_session=session, username=username, password=password, role=role,
                        via="ddpdrill admin create")
    except AccountError as exc:
        err.print(f"Not created: {escape(str(exc))}")
        raise typer.Exit(1) from None
    out.print(f"Created {role} {escape(username)}.")


@admin_app.command("list")
def admin_list() -> None:
    """List the accounts: username, role, whether active."""
    from app.accounts.service import list_users

    settings = get_settings()
    if settings.uses_default_database:
        _upgrade(settings)
    with db_session(settings) as session:
        rows = [(u.username, u.role, u.active) for u in list_users(db_session=session)]
    for name, role, active in rows:
        print(f"{name}\t{role}\t{'active' if active else 'inactive'}")


@contextmanager
def _running_workers(settings: Settings, count: int, stop_timeout: float | None) -> Iterator[None]:
    """`count` verify workers in threads of this process, for as long as the block runs;
    on leaving it they finish (or, after `stop_timeout`, hand back) the runs in hand."""
    import threading

    from app.verify.engine import get_engine
    from app.verify.worker import WorkerPool, warm_engine

    engine = make_engine(settings.resolved_database_url)
    pool = WorkerPool(make_sessionmaker(engine), settings, count)
    # Start the rank pool now, so the first run (perhaps one a dead worker left behind)
    # does not also wait for torch to import.
    threading.Thread(target=warm_engine, args=(settings.sandbox,), name="engine-warmup",
                     daemon=True).start()
    pool.start()
    try:
        yield
    finally:
        pool.shutdown(timeout=stop_timeout)
        engine.dispose()
        get_engine(sandbox=settings.sandbox).close()


@app.command()
def worker(
    concurrency: Annotated[int, typer.Option(min=1, max=8, help="Runs executed at once.")] = 1,
) -> None:
    """Run verify workers against the configured database until SIGTERM or Ctrl-C."""
    import signal
    import threading

    from app.verify.engine import sandbox_status

    settings = get_settings()
    if settings.uses_default_database:
        _upgrade(settings)
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
    with _running_workers(settings, concurrency, stop_timeout=None):
        out.print(f"{concurrency} worker(s) waiting for runs.")
        while not stopping.wait(0.5):
            pass
        out.print(f"Signal {received[0]}: finishing the runs in hand, then stopping.")
    out.print("Workers stopped.")


def prepare_default(settings: Settings) -> None:
    """Migrate the embedded database and load the bank into it when it has no questions."""
    if settings.uses_default_database:
        _upgrade(settings)
    if not settings.load_bank_on_start:
        return
    with db_session(settings) as session:
        count = session.scalar(select(func.count()).select_from(Question))
    if count == 0 and settings.bank_dir.is_dir() and import_directory(settings, settings.bank_dir) != 0:
        raise typer.Exit(1)


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Address to listen on.")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on.")] = None,
    processes: Annotated[int | None, typer.Option(
        min=1, max=64, help="Web processes sharing the port.")] = None,
) -> None:
    """Run the web app (and, by default, an in-process verify worker)."""
    import uvicorn

    settings = get_settings()
    host, port = host or settings.host, port or settings.port
    processes = processes or settings.processes
    if processes == 1:
        from app.main import create_app

        prepare_default(settings)
        out.print(f"DDP Drill on http://{host}:{port}")
        uvicorn.run(create_app(settings), host=host, port=port, log_level="info")
        return
    _serve_processes(settings, host, port, processes)


def _serve_processes(settings: Settings, host: str, port: int, processes: int) -> None:
    """`processes` uvicorn processes on one port, each listening on a socket of its own
    (app/webprocs.py); this process supervises them and runs the verify workers, so a
    class's runs are executed once however many web processes take requests (they wake
    the workers through PostgreSQL's NOTIFY, or on SQLite app/wake.py)."""
    import os
    import shutil
    import tempfile

    from app.webprocs import reserve, serve_processes

    reserved = reserve(host, port)  # a taken port fails now, before any worker starts
    # Each process keeps its metrics in files here and /metrics adds them all up
    # (prometheus_client's multiprocess mode), whichever process a scrape reaches. The
    # folder is read when prometheus_client is first imported (importing the bank below
    # imports it), so it is set first.
    if "prometheus_client" in sys.modules:
        raise RuntimeError("prometheus_client was imported before its multiprocess folder was set")
    metrics_dir = tempfile.mkdtemp(prefix="ddpdrill-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
    try:
        prepare_default(settings)
        # The web processes sign cookies with one key: made (or read) here, before they start.
        settings.resolved_secret_key()
        os.environ["DDPDRILL_WORKERS"] = "0"  # read by the web processes, which run no workers
        workers = (_running_workers(settings, settings.workers, stop_timeout=30)
                   if settings.workers > 0 else nullcontext())
        with workers:
            out.print(f"DDP Drill on http://{host}:{port} ({processes} web processes)")
            serve_processes("app.main:create_app", reserved, factory=True, processes=processes,
                            log_level="info")
    finally:
        reserved.close()
        shutil.rmtree(metrics_dir, ignore_errors=True)


def main() -> None:
    app(prog_name="ddpdrill")


if __name__ == "__main__":
    main()
