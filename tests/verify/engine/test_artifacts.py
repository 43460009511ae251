"""The `artifact(name, kind, source)` a bank snippet calls: what reaches the run result, what the
engine refuses from a rank, and the profile converter's choice of spans."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from app.verify.engine.artifacts import MAX_SPANS, profile_artifact
from app.verify.engine.events import MalformedEvent, parse_event
from tests.verify.helpers import Run


def _event(name: str, artifact: object) -> bytes:
    return json.dumps({"kind": "artifact", "t": 1, "name": name, "artifact": artifact}).encode()


@pytest.mark.parametrize("artifact", [
    {"kind": "trace", "spans": []},                                             # no such kind
    {"kind": "profile", "lanes": ["main"], "spans": [
        {"lane": 0, "name": "x", "category": "forward", "start_ms": -1, "end_ms": 1}]},
    {"kind": "profile", "lanes": ["main"], "spans": [
        {"lane": 0, "name": "x", "category": "forward", "start_ms": 0, "end_ms": 1}] * (MAX_SPANS + 1)},
    {"kind": "memory", "rows": [{"category": "cache", "name": "x", "bytes": 1, "new_bytes": 1}]},
    {"kind": "flight_recorder", "entries": [{"group": "0", "collective_seq": -3, "p2p_seq": 0,
                                             "op": "x", "state": "y"}]},
])
def test_an_artifact_event_of_the_wrong_shape_is_rejected(artifact: object) -> None:
    with pytest.raises(MalformedEvent):
        parse_event(_event("step", artifact))


def test_the_artifact_a_snippet_records_is_in_the_result_and_not_in_the_events(run: Run) -> None:
    result = run("""
        artifact("account", "memory", {"moment": "now", "rows": [
            {"category": "activation", "name": "h", "shape": [2, 3], "dtype": "float32",
             "bytes": 24, "new_bytes": 24}]})
    """, world_size=2)
    assert result.outcome == "ok", result.diagnosis
    for r in result.ranks:
        account = r.artifacts["account"]
        assert account.kind == "memory" and account.total() == 24
        assert all(e["kind"] != "artifact" or "artifact" not in e for e in r.events)


def test_an_unknown_kind_or_source_raises_in_the_snippet_at_its_line(run: Run) -> None:
    result = run("""
        x = 1
        artifact("step", "timeline", None)
    """, world_size=1)
    assert result.outcome == "error"
    err = result.ranks[0].error
    assert err is not None and err.type == "ValueError" and err.line == 3
    assert "one of profile, flight_recorder, memory" in err.message
    result = run('artifact("dump", "flight_recorder", "not a dump")\n', world_size=1)
    assert result.ranks[0].error is not None and result.ranks[0].error.type == "TypeError"


def _fe(name: str, thread: int, start: float, end: float, parent: object = None,
        annotation: bool = False) -> SimpleNamespace:
    return SimpleNamespace(name=name, thread=thread, time_range=SimpleNamespace(start=start, end=end),
                           cpu_parent=parent, is_user_annotation=annotation)


def test_the_profile_keeps_the_models_ops_backward_nodes_and_collectives_only() -> None:
    # Shaped like torch's FunctionEvents of a DDP step (times in µs).
    ddp = _fe("DistributedDataParallel.forward", 1, 0, 100, annotation=True)
    linear = _fe("aten::linear", 1, 10, 50, ddp)
    addmm = _fe("aten::addmm", 1, 12, 48, linear)
    node = _fe("autograd::engine::evaluate_function: AddmmBackward0", 1, 120, 200)
    inner = _fe("aten::mm", 1, 130, 190, node)
    accumulate = _fe("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 1, 200, 210)
    gloo = _fe("gloo:all_reduce", 2, 150, 400, annotation=True)
    slicing = _fe("aten::select", 2, 300, 301)
    copy = _fe("aten::copy_", 1, 450, 460)
    art = profile_artifact([ddp, linear, addmm, node, inner, accumulate, gloo, slicing, copy])
    assert art.lanes == ["main", "gloo 1"]
    assert [(s.name, s.category, s.lane) for s in art.spans] == [
        ("DistributedDataParallel.forward", "ddp", 0), ("aten::linear", "forward", 0),
        ("AddmmBackward0", "backward", 0), ("gloo:all_reduce", "collective", 1)]
    assert art.spans[2].start_ms == 0.12 and art.spans[3].end_ms == 0.4
    assert art.signature() == [["DistributedDataParallel.forward", "aten::linear", "AddmmBackward0"],
                               [("gloo:all_reduce", 1)]]
