"""The schema check every line from a rank passes (events.py), on thousands of generated lines.

Pure: no ranks. The same lines then go through the runner's own line reader and
result assembly, the diagnosis and the timeline, which must never raise.
"""

from __future__ import annotations

import json
import random
import types

import pytest

from app.render.runs import rank_lanes, timeline_picture
from app.verify.engine import runner
from app.verify.engine.events import MALFORMED_EVENT_TYPE, SCHEMAS, MalformedEvent, parse_event
from app.verify.engine.limits import Limits
from app.verify.engine.result import RunResult
from tests.verify.engine.forgery import EXAMPLES, junk_lines, line, random_lines, rejected_lines

SEED = 20_240_613


def test_every_kind_has_an_example_and_the_example_is_accepted_as_sent() -> None:
    assert set(EXAMPLES) == set(SCHEMAS)
    for kind, fields in EXAMPLES.items():
        assert parse_event(line(kind, fields)) == {**fields, "kind": kind, "t": 10**9}


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_every_field_of_every_kind_forged_with_a_wrong_value_is_rejected(kind: str) -> None:
    forgeries = rejected_lines(kind)
    assert {what.split()[0] for what, _ in forgeries} >= set(EXAMPLES[kind])  # every field is attacked
    for what, forged in forgeries:
        with pytest.raises(MalformedEvent) as info:
            parse_event(forged)
            pytest.fail(f"{kind} with {what} was accepted")
        assert 0 < len(str(info.value)) <= 300, what


@pytest.mark.parametrize(("what", "junk"), junk_lines(), ids=[w for w, _ in junk_lines()])
def test_lines_that_are_not_events_are_rejected(what: str, junk: bytes) -> None:
    with pytest.raises(MalformedEvent):
        parse_event(junk.rstrip(b"\n"))


def test_the_issues_forged_bucket_event_names_the_field_it_got_wrong() -> None:
    with pytest.raises(MalformedEvent, match="'params': Input should be a valid list, got 5"):
        parse_event(b'{"kind": "bucket_reduce_start", "t": 1, "params": 5}')


def _assemble(streams: list[bytes]) -> RunResult:
    """The runner's reader and assembly over what each rank 'sent'."""
    ranks = []
    for r, stream in enumerate(streams):
        rank = runner._Rank(r, runner._Capture(64), runner._Capture(64))
        # As a real pipe delivers it: in chunks that split lines anywhere.
        for i in range(0, len(stream), 4093):
            rank.feed_events(stream[i:i + 4093])
        rank.exit = {"code": 0, "t": 10**9 + 5 * 10**6, "cpu_s": 0.1, "maxrss_kb": 1}
        ranks.append(rank)
    watch = types.SimpleNamespace(stop_t=None, stop_reason=None, done={"leftovers": 0}, runaway=False)
    return runner._assemble(watch, ranks, t0=10**9 - 10**6, wall_ms=6.0, code="pass\n",  # type: ignore[arg-type]
                            world_size=len(streams), params={}, limits=Limits(),
                            torch_version="2.13.0+cpu", harness_version="test", pool=None)  # type: ignore[arg-type]


def _prologue() -> bytes:
    return b"".join(line(k, EXAMPLES[k], t=10**9 + i) for i, k in
                    enumerate(("started", "group_ready", "snippet_start")))


def test_thousands_of_random_lines_are_rejected_or_accepted_and_assembly_never_raises() -> None:
    rng = random.Random(SEED)
    lines = random_lines(rng, 6000)
    accepted = rejected = 0
    for raw in lines:
        try:
            event = parse_event(raw.rstrip(b"\n"))
        except MalformedEvent:
            rejected += 1
        else:
            accepted += 1
            SCHEMAS[event["kind"]].model_validate(event)
    # The generator mostly forges, but some of its swaps land on valid values.
    assert rejected > 4000 and accepted > 50
    # (A driver's protocol_error ends its rank's run as that error: not in this honest rank's.)
    honest = _prologue() + b"".join(line(k, f, t=10**9 + 100 + i)
                                    for i, (k, f) in enumerate(EXAMPLES.items())
                                    if k != "protocol_error")
    forged = _prologue() + b"".join(lines)
    result = _assemble([honest, forged])
    RunResult.model_validate_json(result.model_dump_json())
    assert result.outcome == "error"
    assert result.ranks[0].error is not None and result.ranks[0].error.type == "ValueError"
    error = result.ranks[1].error
    assert error is not None and error.type == MALFORMED_EVENT_TYPE
    assert error.message.startswith("the rank sent a malformed event: ")
    assert f"({rejected} malformed lines in all)" in error.message
    assert "Rank 1" in result.diagnosis
    lanes, _ = rank_lanes(result)
    assert len(lanes) == 2
    timeline_picture(result)


def _of_the_reference(raw: bytes) -> bool:
    event = json.loads(raw)
    return event["kind"] == "reference_end" or event.get("source") == "reference"


def test_only_valid_events_assemble_into_the_trace_they_describe() -> None:
    rng = random.Random(SEED + 1)
    valid = [raw for raw in random_lines(rng, 3000) if _accepts(raw)]
    stream = _prologue() + b"".join(valid) + line("snippet_end", {"sent_total": 1}, t=2 * 10**9)
    result = _assemble([stream])
    RunResult.model_validate_json(result.model_dump_json())
    # Every line was a valid event, so nothing marks the rank as forged.
    assert result.ranks[0].error is None or result.ranks[0].error.type != MALFORMED_EVENT_TYPE
    kinds = [e["kind"] for e in result.ranks[0].events]
    # The reference solution's events (an exercise driver's) are not the learner's trace.
    kept = [raw for raw in valid if not _of_the_reference(raw)]
    assert "malformed_event" not in kinds and len(kinds) == len(kept) + 5
    timeline_picture(result)


def _accepts(raw: bytes) -> bool:
    try:
        parse_event(raw.rstrip(b"\n"))
    except MalformedEvent:
        return False
    return True
