"""`ddpdrill verify FILE`: run a snippet on real gloo ranks from the command line.

Registered on the main `ddpdrill` app (app/cli/__init__.py); also runnable alone as
`python -m app.cli.verify FILE ...`.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from app.errors import InvalidInput
from app.verify import knobs
from app.verify.engine import (
    MAX_WORLD_SIZE,
    EngineFailure,
    Limits,
    RunResult,
    SnippetSyntaxError,
    check_snippet,
    get_engine,
)

# Exit status for a command-line mistake (typer uses the same for bad options).
USAGE_ERROR = 2
_OUTCOME_STYLE = {"ok": "green", "error": "red", "timeout": "yellow"}


def _fail(message: str, code: int = USAGE_ERROR) -> typer.Exit:
    Console(stderr=True).print(f"[red]error[/red] {escape(message)}", highlight=False,
                               soft_wrap=True)
    return typer.Exit(code)


def verify_command(
    file: Annotated[Path, typer.Argument(help="The snippet: a Python file (see the snippet contract).",
                                         show_default=False)],
    world_size: Annotated[int, typer.Option("--world-size", "-n",
                                            help=f"Number of ranks, 1 to {MAX_WORLD_SIZE}.")] = 2,
    param: Annotated[list[str] | None, typer.Option(
        "--param", "-p", help="name=value for the snippet's params; JSON if it parses, else a "
                              "string. Repeatable.")] = None,
    timeout: Annotated[float | None, typer.Option(
        "--timeout", help="Wall-clock limit in seconds (default: DDPDRILL_VERIFY_TIMEOUT_S).")] = None,
    repeat: Annotated[int, typer.Option("--repeat", min=1,
                                        help="Run N times on one warm pool.")] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="Print only the result JSON (a list "
                                                         "with --repeat).")] = False,
    trace: Annotated[str | None, typer.Option(
        "--trace", help="Print only the artifact of this name, every rank's, as a question's "
                        "`trace:` block (YAML) to paste into the question file.")] = None,
) -> None:
    """Run a snippet on real gloo ranks and show what torch measured.

    Exits 0 whenever a result was produced, whatever its outcome.
    """
    from app.settings import get_settings

    if not file.is_file():
        raise _fail(f"no such file: {file}")
    if not 1 <= world_size <= MAX_WORLD_SIZE:
        raise _fail(f"--world-size must be between 1 and {MAX_WORLD_SIZE}, not {world_size}")
    try:
        code = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _fail(f"cannot read {file}: {exc}") from None
    try:
        check_snippet(code)
    except SnippetSyntaxError as exc:
        where = f" line {exc.line}" if exc.line is not None else ""
        raise _fail(f"{file}{where}: syntax error: {exc.message}") from None
    try:
        params = knobs.from_pairs(param or [])
        limits = Limits.from_settings(get_settings())
        if timeout is not None:
            limits = Limits(timeout_s=timeout, memory_bytes=limits.memory_bytes,
                            cpu_seconds=limits.cpu_seconds, output_bytes=limits.output_bytes,
                            processes=limits.processes, scratch_bytes=limits.scratch_bytes)
    except (ValueError, InvalidInput) as exc:
        raise _fail(str(exc)) from None

    engine = get_engine(sandbox=get_settings().sandbox)  # closed at exit (atexit)
    results: list[RunResult] = []
    try:
        for _ in range(repeat):
            results.append(engine.run(code, world_size=world_size, params=params, limits=limits))
    except EngineFailure as exc:
        raise _fail(f"the verify engine failed: {exc}", code=1) from None

    if trace is not None:
        text = trace_yaml(results[-1], trace)
        if text is None:
            raise _fail(f"the run recorded no artifact named {trace!r}"
                        f" ({results[-1].outcome}: {results[-1].diagnosis.splitlines()[0]})", code=1)
        sys.stdout.write(text)
        return
    if as_json:
        data = [r.model_dump(mode="json") for r in results]
        sys.stdout.write(json.dumps(data if repeat > 1 else data[0], indent=2) + "\n")
        return
    console = Console()
    if repeat == 1:
        show(results[0], console)
        return
    for i, r in enumerate(results, 1):
        style = _OUTCOME_STYLE[r.outcome]
        console.print(f"run {i}: [{style}]{r.outcome}[/{style}] in {r.timings['wall_ms']:.1f} ms",
                      highlight=False)
    walls = [r.timings["wall_ms"] for r in results]
    console.print(f"median {statistics.median(walls):.1f} ms, min {min(walls):.1f} ms, "
                  f"max {max(walls):.1f} ms over {repeat} runs", highlight=False)
    show(results[-1], console)


def trace_yaml(result: RunResult, name: str) -> str | None:
    """The artifact `name` of every rank that recorded it as a question's measured `trace:`
    block; one line per span, entry or row, so the question file stays readable."""
    import yaml

    ranks = [{"rank": r.rank, "artifact": r.artifacts[name].model_dump(mode="json")}
             for r in result.ranks if name in r.artifacts]
    if not ranks:
        return None
    version = result.torch_version.split("+")[0]
    block = {"trace": {"kind": "artifact", "caption": "", "name": name, "ranks": ranks,
                       "source": {"kind": "measured", "torch_version": version,
                                  "note": "Recorded by this question's snippet; Verify runs it again "
                                          "and checks the run's artifact against this one."}}}

    class Dumper(yaml.SafeDumper):
        pass

    def mapping(dumper: yaml.SafeDumper, data: dict[str, Any]) -> yaml.MappingNode:
        leaf = all(not isinstance(v, dict) and not (isinstance(v, list) and v and isinstance(v[0], dict))
                   for v in data.values())
        return dumper.represent_mapping("tag:yaml.org,2002:map", data, flow_style=leaf or None)

    def sequence(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.SequenceNode:
        flat = not any(isinstance(v, dict) for v in data)
        return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flat or None)

    Dumper.add_representer(dict, mapping)
    Dumper.add_representer(list, sequence)
    return yaml.dump(block, Dumper=Dumper, sort_keys=False, allow_unicode=True, width=120)


def _compact(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def show(result: RunResult, console: Console) -> None:
    """The readable summary: outcome, per-rank values, buckets, diagnosis."""
    style = _OUTCOME_STYLE[result.outcome]
    limit = f", limit hit: {result.limit}" if result.limit else ""
    console.print(f"[bold {style}]{result.outcome}[/bold {style}]{limit} — {result.world_size} "
                  f"rank(s), {result.timings.get('wall_ms', 0):.1f} ms, torch "
                  f"{result.torch_version}", highlight=False)

    ranks = Table(title="Ranks", title_justify="left")
    for column in ("rank", "values", "exit", "error / blocked in"):
        ranks.add_column(column, overflow="fold")
    for rr in result.ranks:
        values = "\n".join(f"{k} = {_compact(v)}" for k, v in rr.values.items()) or "-"
        exit_text = rr.signal or ("-" if rr.exit_code is None else str(rr.exit_code))
        problem = "-"
        if rr.error is not None:
            line = f" (line {rr.error.line})" if rr.error.line else ""
            problem = f"{rr.error.type}: {rr.error.message.splitlines()[0] if rr.error.message else ''}{line}"
        if rr.blocked_in is not None:
            blocked = rr.blocked_in
            problem += (f"\nblocked in {blocked.op} since {blocked.since_ms:.1f} ms"
                        + (f", iteration {blocked.iteration}" if blocked.iteration else ""))
        ranks.add_row(str(rr.rank), escape(values), exit_text, escape(problem))
    console.print(ranks)

    if result.buckets:
        buckets = Table(title="Gradient buckets (ms from run start)", title_justify="left")
        for column in ("rank", "iter", "bucket", "params", "bytes", "first ready", "last ready",
                       "reduce start", "reduce end"):
            buckets.add_column(column, overflow="fold")

        def ms(v: float | None) -> str:
            return "-" if v is None else f"{v:.2f}"

        for b in result.buckets:
            names = ", ".join(b.params) + (" (shadow)" if b.shadow else "")
            buckets.add_row(str(b.rank), str(b.iteration), str(b.index), escape(names),
                            str(b.bytes), ms(b.first_ready_ms), ms(b.last_ready_ms),
                            ms(b.reduce_start_ms), ms(b.reduce_end_ms))
        console.print(buckets)

    for rr in result.ranks:
        for stream in ("stdout", "stderr"):
            text = getattr(rr, stream).rstrip()
            if text:
                console.print(f"[dim]rank {rr.rank} {stream}:[/dim]")
                console.print(escape(text[-2000:]), highlight=False)
    console.print(f"[bold]Diagnosis:[/bold] {escape(result.diagnosis)}", highlight=False)


cli = typer.Typer(add_completion=False)
cli.command()(verify_command)

if __name__ == "__main__":
    cli()
