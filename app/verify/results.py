"""A run's result: typed from its stored JSON, checked and trimmed to size on the way in, and
what a learner may read of their own exercise run (their values, their own frames)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from app.questions.schema import QuestionDoc
from app.verify.engine.forbid import CHECKS_MARK, SNIPPET_FILE
from app.verify.engine.result import RankResult, RunResult
from app.verify.expectations import applies
from app.verify.models import (
    RUN_DONE,
    Run,
)

# Results above this size are trimmed (events first) before they are stored.
MAX_RESULT_BYTES = 2 * 1024 * 1024


class InvalidResult(ValueError):
    """A worker returned something that is not a valid run result."""


HARNESS_MARK = CHECKS_MARK




def result_of(run: Run) -> RunResult | None:
    """A finished run's measured result, typed (stored results were validated on the way in)."""
    if run.status != RUN_DONE or run.result is None:
        return None
    return RunResult.model_validate(run.result)


def visible_reads(doc: QuestionDoc | None, params: dict[str, Any], world_size: int,
                  rank: int) -> set[str]:
    """The values this run's visible checks read on this rank: those of the checks that apply
    to its knob values and world size (`when`) and read this rank (or every rank). A value
    only a hidden check reads here (the same name on another world size, say) is not one."""
    out: set[str] = set()
    for e in (doc.verify.expect if doc is not None and doc.verify else []):
        if e.value is None or e.hidden or not applies(e, params, world_size):
            continue
        if e.value.rank == "all" or e.value.rank == rank:
            out.add(e.value.name)
    return out


def learner_view(result: RunResult, doc: QuestionDoc | None) -> RunResult:
    """An exercise run's result as its learner may read it. The run carries the checks'
    reports (and the reference solution's, on the same data) too: the learner keeps, on each
    rank, the values and memory marks that run's visible checks read there and their own
    reports, never what only a hidden check measured (its name and value would describe the
    check)."""
    params = dict(result.params or {})
    expect = [e for e in (doc.verify.expect if doc is not None and doc.verify else [])
              if not e.hidden and applies(e, params, result.world_size)]

    def trimmed(rank: RankResult) -> dict[str, Any]:
        visible = visible_reads(doc, params, result.world_size, rank.rank)
        visible_reference = visible | {
            e.value.reference_name for e in expect if e.value is not None
            and e.value.reference_name and e.value.rank in ("all", rank.rank)}
        marks = {c.mark for c in [*(e.memory for e in expect), *(e.marks for e in expect)]
                 if c is not None and c.rank in ("all", rank.rank)}

        def kept(event: dict[str, Any]) -> bool:
            kind, source = event.get("kind"), event.get("source")
            if kind == "report" and source == "checks":
                return event.get("name") in visible
            return not (kind == "memory_mark" and event.get("name") not in marks)

        update: dict[str, Any] = {
            "values": {k: v for k, v in rank.values.items() if k in visible},
            "reference_values": {k: v for k, v in rank.reference_values.items()
                                 if k in visible_reference},
            "memory_marks": [m for m in rank.memory_marks if m.name in marks],
            "reference_marks": [m for m in rank.reference_marks if m.name in marks],
            "events": [e for e in rank.events if kept(e)],
            # The checks' own lines (their file is not the learner's) never reach the page.
            "stack": own_frames(rank.stack) if rank.stack else rank.stack}
        if rank.error is not None:
            update["error"] = rank.error.model_copy(
                update={"traceback": own_frames(rank.error.traceback)})
        return update

    return result.model_copy(update={"ranks": [rank.model_copy(update=trimmed(rank))
                                               for rank in result.ranks]})


def own_frames(traceback: str) -> str:
    """A Python traceback (or stack) with only the frames of the learner's file kept: the
    harness's and the checks' frames, and their source lines, are left out."""
    out: list[str] = []
    keep = False
    for line in traceback.splitlines():
        if line.startswith("  File "):
            keep = line.startswith(f'  File "{SNIPPET_FILE}"')
            if keep:
                out.append(line)
        elif line.startswith("    "):
            if keep:
                out.append(line)
        else:
            keep = False
            out.append(line)
    return "\n".join(out)


def validate_result(result: RunResult | dict[str, Any]) -> dict[str, Any]:
    """A result as stored: checked against the engine's model (a RunResult the engine built
    already is) and capped in size; raises InvalidResult."""
    if isinstance(result, RunResult):
        try:
            return cap_result(result.model_dump(mode="json"))
        except (ValueError, TypeError) as exc:  # a value that will not serialise
            raise InvalidResult(f"the result could not be stored: {exc}") from exc
    try:
        data = RunResult.model_validate(result).model_dump(mode="json")
    except ValidationError as exc:
        raise InvalidResult(f"result does not match the run result schema: {exc}") from exc
    return cap_result(data)


def cap_result(data: dict[str, Any], limit: int = MAX_RESULT_BYTES) -> dict[str, Any]:
    """Trim a result until its JSON fits in `limit` bytes, saying what was dropped.

    Events go first (the later half of the longest list, repeatedly), then output,
    bucket records and finally oversized reported values, which become a short note.
    """
    # The JSON's length, encoded again only after something was cut (most results fit as
    # they are, and encoding a large one is most of storing it).
    measured: list[int] = []

    def size() -> int:
        if not measured:
            measured.append(len(json.dumps(data)))
        return measured[0]

    def cut() -> None:
        measured.clear()

    notes: list[str] = []
    ranks = data.get("ranks") or []
    dropped = 0
    while size() > limit:
        longest = max(ranks, key=lambda r: len(r.get("events") or []), default=None)
        if not longest or len(longest.get("events") or []) <= 10:
            break
        events = longest["events"]
        keep = len(events) // 2
        dropped += len(events) - keep
        longest["events"] = events[:keep]
        cut()
    if dropped:
        notes.append(f"{dropped} later events dropped")
    if size() > limit:
        for r in ranks:
            r["stdout"] = (r.get("stdout") or "")[:1024]
            r["stderr"] = (r.get("stderr") or "")[:1024]
            r["stack"] = (r.get("stack") or "")[:1024] or None
        data["buckets"] = (data.get("buckets") or [])[:200]
        cut()
        notes.append("output and bucket records shortened")
    # An exercise learner's own reports before the checks' (no check reads them).
    for field_name in ("learner_values", "values"):
        if size() <= limit:
            break
        values = [(len(json.dumps(v)), r, name) for r in ranks
                  for name, v in (r.get(field_name) or {}).items()]
        for nbytes, r, name in sorted(values, key=lambda t: t[0], reverse=True):
            if size() <= limit:
                break
            r[field_name][name] = f"(not stored: {nbytes} bytes of JSON)"
            cut()
        notes.append("the largest reported values replaced by their size")
    if size() > limit:
        for r in ranks:
            r["events"] = []
        cut()
        notes.append("all events dropped")
    if notes:
        data["diagnosis"] = (data.get("diagnosis") or "") + (
            f" (Stored result trimmed to fit {limit} bytes: {'; '.join(notes)}.)")
    return data
