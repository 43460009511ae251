"""The `ddpdrill` command."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from sqlalchemy import func, select

from app.db import make_engine, make_sessionmaker, session_scope
from app.questions.bank import load_bank, write_bank
from app.questions.models import Question
from app.questions.service import export_bank, import_bank
from app.settings import Settings, get_settings

app = typer.Typer(help="DDP Drill: practise PyTorch distributed-training questions.",
                  no_args_is_help=True, add_completion=False)
db_app = typer.Typer(help="Database migrations.", no_args_is_help=True)
bank_app = typer.Typer(help="The question bank as files.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(bank_app, name="bank")

out = Console()
err = Console(stderr=True)


def _upgrade(settings: Settings) -> None:
    from app.migrate import upgrade

    upgrade(settings.resolved_database_url)


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Apply every migration to the configured database."""
    _upgrade(get_settings())
    out.print("Database is at the latest revision.")


def _check(directory: Path) -> int:
    bank = load_bank(directory)
    for error in bank.errors:
        err.print(f"[red]error[/red] {error}", highlight=False, markup=True)
    if bank.errors:
        err.print(f"{len(bank.errors)} error(s) in {directory}")
        return 1
    out.print(f"{len(bank.questions)} questions in {len(bank.topics)} topics: all valid.")
    return 0


BankDir = Annotated[Path | None, typer.Argument(help="Bank folder (default: DDPDRILL_BANK_DIR).")]


@bank_app.command("check")
def bank_check(directory: BankDir = None) -> None:
    """Validate the bank files without touching the database."""
    raise typer.Exit(_check(directory or get_settings().bank_dir))


def import_directory(settings: Settings, directory: Path) -> int:
    """Validate, then import all of the bank in one transaction; 1 on any error."""
    bank = load_bank(directory)
    for error in bank.errors:
        err.print(f"[red]error[/red] {error}", highlight=False)
    if bank.errors:
        err.print(f"{len(bank.errors)} error(s); nothing was imported.")
        return 1
    engine = make_engine(settings.resolved_database_url)
    try:
        with session_scope(make_sessionmaker(engine)) as session:
            report = import_bank(db_session=session, bank=bank)
    finally:
        engine.dispose()
    out.print(f"Imported {directory}: {report.summary()}.")
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
    engine = make_engine(settings.resolved_database_url)
    try:
        with session_scope(make_sessionmaker(engine)) as session:
            docs, topics = export_bank(db_session=session)
    finally:
        engine.dispose()
    write_bank(directory, docs, topics)
    out.print(f"Wrote {len(docs)} questions in {len(topics)} topics to {directory}.")


def prepare_default(settings: Settings) -> None:
    """Migrate the embedded database and load the bank into it when it has no questions."""
    if settings.uses_default_database:
        _upgrade(settings)
    if not settings.load_bank_on_start:
        return
    engine = make_engine(settings.resolved_database_url)
    try:
        with session_scope(make_sessionmaker(engine)) as session:
            count = session.scalar(select(func.count()).select_from(Question))
    finally:
        engine.dispose()
    if count == 0 and settings.bank_dir.is_dir() and import_directory(settings, settings.bank_dir) != 0:
        raise typer.Exit(1)


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Address to listen on.")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on.")] = None,
) -> None:
    """Run the web app (and, by default, an in-process verify worker)."""
    import uvicorn

    from app.main import create_app

    settings = get_settings()
    prepare_default(settings)
    out.print(f"DDP Drill on http://{host or settings.host}:{port or settings.port}")
    uvicorn.run(create_app(settings), host=host or settings.host, port=port or settings.port,
                log_level="info")


def main() -> None:
    app(prog_name="ddpdrill")


if __name__ == "__main__":
    sys.exit(main())
