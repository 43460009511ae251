"""`ddpdrill bank ...`: the question bank as files — check, coverage, import, export, verify."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from app.cli.common import db_session, err, out, print_errors, settings_for_command
from app.db import make_engine, make_sessionmaker
from app.questions.bank import load_bank, write_bank
from app.questions.service import export_bank, import_bank
from app.settings import Settings, get_settings

if TYPE_CHECKING:
    from rich.table import Table

    from app.verify.audit import QuestionAudit

bank_app = typer.Typer(help="The question bank as files.", no_args_is_help=True)

BankDir = Annotated[Path | None, typer.Argument(help="Bank folder (default: DDPDRILL_BANK_DIR).")]


def check(directory: Path) -> int:
    """Validate the bank's files and its fairness; the exit status."""
    from app.questions.covered import check_covered
    from app.questions.fairness import check_fairness

    bank = load_bank(directory)
    if print_errors(bank.errors):
        err.print(f"{len(bank.errors)} error(s) in {directory}")
        return 1
    # Arithmetic the planner covers is called by name, so each such key is its answer.
    covered = print_errors(check_covered(bank.questions))
    fairness = check_fairness(bank.questions)
    for finding in fairness.warnings:
        err.print(f"[yellow]warning[/yellow] {escape(str(finding))}", highlight=False, soft_wrap=True)
    print_errors(fairness.errors)
    out.print(f"Fairness: {escape(fairness.summary())}.", highlight=False, soft_wrap=True)
    if covered:
        err.print(f"{covered} expression(s) in {directory} spell out arithmetic the planner covers")
    if fairness.errors:
        err.print(f"{len(fairness.errors)} bank-wide fairness error(s) in {directory}")
    if covered or fairness.errors:
        return 1
    out.print(f"{len(bank.questions)} questions in {len(bank.topics)} topics: all valid"
              f" ({len(fairness.warnings)} fairness warning(s)).")
    return 0


@bank_app.command("check")
def bank_check(directory: BankDir = None) -> None:
    """Validate the bank files and their fairness without touching the database."""
    raise typer.Exit(check(directory or get_settings().bank_dir))


@bank_app.command("coverage")
def bank_coverage(
    directory: BankDir = None,
    output: Annotated[Path | None, typer.Option(
        help="File to write (default: docs/coverage.md beside the bank folder).")] = None,
    check_only: Annotated[bool, typer.Option(
        "--check", help="Write nothing; exit 1 if the file differs from what would be written.")] = False,
) -> None:
    """Generate docs/coverage.md from the bank's fact list and the facts its expectations measure."""
    from app.questions.facts import FACTS_FILE, default_coverage_path, render_coverage

    bank_dir = directory or get_settings().bank_dir
    bank = load_bank(bank_dir)
    if print_errors(bank.errors):
        raise typer.Exit(1)
    if bank.facts is None:
        err.print(f"No {FACTS_FILE} in {bank_dir}.")
        raise typer.Exit(1)
    target = output or default_coverage_path(bank_dir)
    text = render_coverage(bank.facts, bank.questions)
    if check_only:
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
    if print_errors(bank.errors):
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
    settings = settings_for_command()
    raise typer.Exit(import_directory(settings, directory or settings.bank_dir))


@bank_app.command("export")
def bank_export(directory: Annotated[Path, typer.Argument(help="Folder to write into.")]) -> None:
    """Write the current bank from the database as files that import back unchanged."""
    with db_session(settings_for_command()) as session:
        docs, topics = export_bank(db_session=session)
    write_bank(directory, docs, topics)
    out.print(f"Wrote {len(docs)} questions in {len(topics)} topics to {directory}.")


@bank_app.command("verify")
def bank_verify(
    slug: Annotated[str | None, typer.Option(help="Audit only this question.")] = None,
    fresh: Annotated[bool, typer.Option("--fresh", help="Ignore cached runs; execute again.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the audit as JSON only.")] = False,
    every_check: Annotated[bool, typer.Option(
        "--all", help="List every check of every question, not only those of questions that fail.")] = False,
) -> None:
    """Run every question's expectations against torch; exit 1 if any answer key disagrees."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from app.verify.audit import audit_bank

    settings = settings_for_command()
    engine = make_engine(settings.resolved_database_url)
    factory = make_sessionmaker(engine)
    try:
        if as_json:
            audits = audit_bank(factory, settings, slug=slug, fresh=fresh)
        else:
            with Progress(TextColumn("Verifying runs"), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn(), console=err, transient=True,
                          refresh_per_second=4) as progress:
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
            if a.passed and not (every_check or slug):
                # One row for a question that agrees (its checks are in --all and --json): the
                # whole bank's 2,000-odd check rows would bury the few that fail.
                combos, checks = len(a.gate.combos), sum(len(c.checks) for c in a.gate.combos)
                table.add_row(a.slug, _count(combos, "combination"), _count(checks, "check"),
                              "—", "—", "[green]pass[/green]")
                continue
            _add_check_rows(table, a)
        out.print(table)
        combos = sum(len(a.gate.combos) for a in audits)
        out.print(f"{len(audits) - len(failed)}/{len(audits)} questions agree with torch "
                  f"({combos} knob combinations).")
    if failed:
        if not as_json:
            err.print("Disagree: " + ", ".join(a.slug for a in failed))
        raise typer.Exit(1)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _add_check_rows(table: Table, a: QuestionAudit) -> None:
    """A question's rows of the audit table: each check of each combination, and each problem."""
    for p in a.gate.binding_problems:
        where = ".".join(str(part) for part in p.loc)
        table.add_row(a.slug, "—", "key binding", escape(where), escape(str(p)), "[red]FAIL[/red]")
    for problem in a.gate.problems():
        table.add_row(a.slug, "—", "known-wrong solution", "fails a check somewhere",
                      escape(problem), "[red]FAIL[/red]")
    for c in a.gate.combos:
        knobs = ", ".join(f"{k}={v}" for k, v in c.params.items()) or "—"
        if c.role != "question":
            # An exercise's starter and wrong solutions must fail a check: say so.
            knobs = f"{c.role_label} ({c.state}): {knobs}"
        if c.needless:
            table.add_row(a.slug, escape(knobs), "run", "—", "not run", "skip")
            continue
        # Measured text (torch's error messages) may contain [brackets]: escape it.
        if c.failure:
            table.add_row(a.slug, escape(knobs), "run", "a finished run", escape(c.failure),
                          "[red]FAIL[/red]")
        for x in c.checks:
            table.add_row(a.slug, escape(knobs), escape(x.label), escape(x.expected),
                          escape(x.measured),
                          "[green]pass[/green]" if x.passed else "[red]FAIL[/red]")
