"""A snippet that writes on its rank's event channel cannot break the runner (real gloo ranks).

The channel is reachable the way an attacker finds it: the snippet runs inside the
harness's `_rank` frame, so `sys._getframe().f_back.f_locals["events"]` is the
emitter and its `_fd` the pipe. Whatever goes down it, the run completes, the
result validates, and only the forging rank's result is an error.
"""

from __future__ import annotations

import base64
import random

import pytest

from app.verify.engine.events import MALFORMED_EVENT_TYPE, MalformedEvent, parse_event
from app.verify.engine.result import RunResult
from tests.verify.engine.forgery import EXAMPLES, junk_lines, random_lines, rejected_lines
from tests.verify.helpers import Run, events

FORGER = """
import base64, os, sys, time
import torch, torch.distributed as dist

def channel():
    frame = sys._getframe()
    while frame is not None:
        emitter = frame.f_locals.get("events")
        if hasattr(emitter, "_fd"):
            return emitter._fd
        frame = frame.f_back
    raise RuntimeError("no channel found")

t = torch.ones(4)
dist.all_reduce(t)
if rank == 1:
    fd = channel()
    for text in params["lines"]:
        os.write(fd, base64.b64decode(text))
    if params.get("deep"):
        os.write(fd, b"[" * 100_000 + b"]" * 100_000 + b"\\n")
        os.write(fd, b'{"kind": "report", "t": 1, "name": "x", "iteration": null, "value": '
                 + b'{"a": ' * 50_000 + b"1" + b"}" * 50_001 + b"\\n")
dist.all_reduce(t)
report("sum", t)
"""


def _lines(raw: list[bytes]) -> list[str]:
    return [base64.b64encode(x).decode() for x in raw]


def _rejected(raw: list[bytes]) -> int:
    count = 0
    for x in raw:
        for part in x.split(b"\n")[:-1]:
            try:
                parse_event(part)
            except MalformedEvent:
                count += 1
    return count


def _check(result: RunResult, malformed: int) -> None:
    """The run completed: rank 0 is untouched, rank 1 is an error of the snippet, not of the engine."""
    RunResult.model_validate_json(result.model_dump_json())
    assert result.outcome == "error", result.diagnosis
    honest, forger = result.ranks
    assert honest.error is None and honest.exit_code == 0
    # (A forged line that happens to be a valid report still lands in values: telling it
    # from the harness's own is the tamper check's job, not the schema's.)
    assert honest.values == {"sum": [4.0] * 4} and forger.values["sum"] == [4.0] * 4
    assert forger.error is not None and forger.error.type == MALFORMED_EVENT_TYPE
    assert forger.error.message.startswith("the rank sent a malformed event: ")
    if malformed > 1:
        assert forger.error.message.endswith(f"({malformed} malformed lines in all)")
    marks = events(result, 1, "malformed_event")
    assert len(marks) == 1 and marks[0]["count"] == malformed
    assert result.diagnosis.startswith("Rank 1 failed first: MalformedEvent: the rank sent a malformed")
    # The honest events after the forgery are still there: the second all-reduce ends. (A
    # random line can happen to be a well-formed collective_end too, so: at least two.)
    assert [e["op"] for e in events(result, 1, "collective_end")].count("all_reduce") >= 2


def test_the_issues_forged_bucket_event_makes_that_rank_an_error_not_an_engine_failure(run: Run) -> None:
    result = run("""
    import sys, os, time, json
    import torch, torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    ddp = DDP(nn.Linear(2, 1, bias=False))
    ddp(torch.ones(1, 2)).sum().backward()
    if rank == 1:
        fd = sys._getframe().f_back.f_locals["events"]._fd
        os.write(fd, json.dumps({"kind": "bucket_reduce_start", "t": time.monotonic_ns(),
                                 "params": 5}).encode() + b"\\n")
    ddp(torch.ones(1, 2)).sum().backward()
    report("grad", ddp.module.weight.grad)
    """)
    RunResult.model_validate_json(result.model_dump_json())
    assert result.outcome == "error"
    error = result.ranks[1].error
    assert error is not None and error.type == MALFORMED_EVENT_TYPE
    assert "bucket_reduce_start, field 'params': Input should be a valid list, got 5" in error.message
    assert result.ranks[0].error is None
    # Both ranks' honest bucket reductions are still recorded: two iterations each.
    assert sorted((b.rank, b.iteration) for b in result.buckets) == [(0, 1), (0, 2), (1, 1), (1, 2)]


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_every_forgery_of_every_kind_on_the_channel_is_caught(run: Run, kind: str) -> None:
    forged = [x for _, x in rejected_lines(kind)]
    result = run(FORGER, params={"lines": _lines(forged)})
    _check(result, malformed=len(forged))


def test_junk_random_bytes_random_json_and_deep_nesting_are_caught(run: Run) -> None:
    rng = random.Random(7)
    raw = [x for _, x in junk_lines() if len(x) < 10_000] + random_lines(rng, 300)
    raw.append(bytes(rng.randrange(256) for _ in range(3000)) + b"\n")  # newlines inside, too
    expected = _rejected(raw) + 2  # and the two deep lines the snippet builds itself
    result = run(FORGER, params={"lines": _lines(raw), "deep": True})
    _check(result, malformed=expected)


def test_a_line_left_unfinished_spoils_the_harness_line_that_follows_it(run: Run) -> None:
    result = run(FORGER, params={"lines": _lines([b'{"kind": "report", "t": 1, "na'])})
    # The forger's half line and the harness's next event became one line: rejected.
    _check(result, malformed=1)
