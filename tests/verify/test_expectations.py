"""Expectations checked against typed run results (built from their stored JSON form)."""

from __future__ import annotations

from typing import Any

import pytest

from app.questions.schema import Expectation
from app.verify.engine.result import RunResult
from app.verify.expectations import applies, check, close, evaluate


def bucket(rank: int, iteration: int, index: int, start: float) -> dict[str, Any]:
    return {"rank": rank, "iteration": iteration, "index": index, "reduce_start_ms": start,
            "params": ["w"], "bytes": 8, "first_ready_ms": None, "last_ready_ms": None,
            "reduce_end_ms": start + 1}


def result(**over: Any) -> RunResult:
    """A run result as the database stores it, read back typed; `over` edits the JSON first."""
    base: dict[str, Any] = {
        "outcome": "ok", "diagnosis": "", "world_size": 2, "torch_version": "2.13.0",
        "harness_version": "3",
        "ranks": [
            {"rank": 0, "values": {"g": [[1.5, 1.5]], "n": 3}, "error": None, "blocked_in": None},
            {"rank": 1, "values": {"g": [[1.5, 1.5]], "n": 4}, "error": None, "blocked_in": None},
        ],
        "buckets": [bucket(0, 0, 0, 5.0), bucket(0, 1, 1, 9.0), bucket(0, 1, 0, 11.0),
                    bucket(1, 0, 0, 5.2)],
    }
    for name, value in over.items():
        if name.startswith("rank"):  # rank0_blocked_in=..., rank1_error=..., rank0_bytes_sent=...
            index, field = name[4], name[6:]
            base["ranks"][int(index)][field] = value
        else:
            base[name] = value
    return RunResult.model_validate(base)


def exp(**kw: Any) -> Expectation:
    return Expectation.model_validate({"label": "x", **kw})


def test_value_on_every_rank_passes_within_tolerance() -> None:
    got = check(exp(value={"name": "g", "equals": [[1.5, 1.5000001]]}), result())
    assert got.passed
    assert got.per_rank == {0: ([[1.5, 1.5]], True), 1: ([[1.5, 1.5]], True)}


def test_value_fails_when_one_rank_differs() -> None:
    got = check(exp(value={"name": "n", "equals": 3}), result())
    assert not got.passed
    assert got.per_rank is not None and got.per_rank[1] == (4, False)


def test_value_on_one_rank_ignores_the_others() -> None:
    assert check(exp(value={"name": "n", "rank": 1, "equals": 4}), result()).passed


def test_missing_value_fails_and_says_not_reported() -> None:
    got = check(exp(value={"name": "absent", "equals": 1}), result())
    assert not got.passed and "not reported" in got.measured


def test_outcome_check() -> None:
    assert check(exp(outcome="ok"), result()).passed
    assert not check(exp(outcome="timeout"), result()).passed


def test_blocked_check_names_rank_and_op() -> None:
    res = result(outcome="timeout",
                 rank0_blocked_in={"op": "all_reduce", "since_ms": 12.0, "iteration": 2})
    assert check(exp(blocked={"rank": 0, "op": "all_reduce"}), res).passed
    assert not check(exp(blocked={"rank": 0, "op": "barrier"}), res).passed
    assert not check(exp(blocked={"rank": 1, "op": "all_reduce"}), res).passed


def test_error_check_matches_type_and_message_fragment() -> None:
    res = result(outcome="error", rank1_error={"type": "RuntimeError", "line": 9,
                                               "message": "Rank 1 exhausted all inputs"})
    assert check(exp(error={"type": "RuntimeError", "message_contains": "exhausted"}), res).passed
    assert check(exp(error={"rank": 1, "type": "RuntimeError"}), res).passed
    assert not check(exp(error={"rank": "all", "type": "RuntimeError"}), res).passed
    assert not check(exp(error={"rank": 0}), res).passed


def test_bucket_count_and_order() -> None:
    assert check(exp(bucket_count={"rank": 0, "count": 3}), result()).passed
    assert check(exp(bucket_count={"rank": 0, "iteration": 1, "count": 2}), result()).passed
    assert check(exp(bucket_order={"rank": 0, "iteration": 1, "indices": [1, 0]}), result()).passed
    assert not check(exp(bucket_order={"rank": 0, "iteration": 1, "indices": [0, 1]}), result()).passed


def test_when_conditions_select_expectations_by_knob() -> None:
    e1 = exp(when={"divide": True}, value={"name": "n", "rank": 0, "equals": 3})
    e2 = exp(when={"divide": False}, value={"name": "n", "rank": 0, "equals": 99})
    assert applies(e1, {"divide": True}, 2) and not applies(e2, {"divide": True}, 2)
    checks = evaluate([e1, e2], result(), {"divide": True}, 2)
    assert len(checks) == 1 and checks[0].passed


def test_when_on_world_size() -> None:
    e = exp(when={"world_size": 4}, outcome="ok")
    assert applies(e, {}, 4) and not applies(e, {}, 2)


@pytest.mark.parametrize(
    ("measured", "expected", "ok"),
    [(1.0, 1.0, True), (1.0, 1.1, False), ([1, [2, 3]], [1, [2, 3.0000001]], True),
     ([1, 2], [1, 2, 3], False), (True, 1, False), ("a", "a", True), (float("nan"), 1.0, False)],
)
def test_close_compares_nested_numbers(measured: Any, expected: Any, ok: bool) -> None:
    assert close(measured, expected, 1e-6) is ok


def test_bucket_overlap_compares_each_reduction_start_with_the_last_gradient() -> None:
    events = [{"kind": "grad_ready", "t_ms": t, "iteration": 1, "param": p, "ddp": 0}
              for t, p in ((4.0, "b"), (10.0, "a"))]
    res = result(rank0_events=events,
                 buckets=[bucket(0, 1, 0, 5.0), bucket(0, 1, 1, 11.0)])
    overlapped = check(exp(bucket_overlap={"rank": 0, "iteration": 1, "buckets": [0]}), res)
    assert overlapped.passed and "bucket 0 at 5.00 ms" in overlapped.measured
    assert "10.00 ms" in overlapped.measured
    exposed = check(exp(bucket_overlap={"rank": 0, "iteration": 1, "buckets": [0, 1]}), res)
    assert not exposed.passed
    missing = check(exp(bucket_overlap={"rank": 0, "iteration": 2, "buckets": [0]}), res)
    assert not missing.passed and missing.measured == "no bucket timeline for that iteration"


def test_an_unexpected_outcome_says_why() -> None:
    failed = result(outcome="error", diagnosis="Rank 1 raised RuntimeError: boom\nmore detail")
    got = check(exp(outcome="ok"), failed)
    assert not got.passed
    assert got.measured == "outcome error: Rank 1 raised RuntimeError: boom"
    # An expected outcome needs no reason.
    assert check(exp(outcome="error"), failed).measured == "outcome error"


def _started(*ops: tuple[str, str], iteration: int | None = None) -> list[dict[str, Any]]:
    return [{"kind": "collective_start", "op": op, "source": source, "iteration": iteration,
             "t_ms": 1.0} for op, source in ops]


def test_collectives_count_each_ranks_starts_of_one_op() -> None:
    res = result(rank0_events=_started(("all_reduce", "snippet"), ("all_reduce", "torch"),
                                       ("broadcast", "snippet")),
                 rank1_events=_started(("all_reduce", "snippet")))
    got = check(exp(collectives={"op": "all_reduce", "count": 2}), res)
    assert got.passed and got.expected == "all_reduce entered exactly 2 times on rank 0"
    assert check(exp(collectives={"op": "all_reduce", "count": 1, "source": "torch"}), res).passed
    assert check(exp(collectives={"op": "all_reduce", "count": 1, "source": "snippet"}), res).passed
    every = check(exp(collectives={"rank": "all", "op": "all_reduce", "at_least": 2}), res)
    assert not every.passed and every.per_rank == {0: (2, True), 1: (1, False)}
    assert check(exp(collectives={"rank": "all", "op": "all_reduce", "at_most": 2}), res).passed
    assert check(exp(collectives={"rank": 1, "op": "barrier", "count": 0}), res).passed
    missing = check(exp(collectives={"rank": 5, "op": "barrier", "count": 0}), res)
    assert not missing.passed and "(not in this run)" in missing.measured


def test_collectives_can_count_one_iteration() -> None:
    res = result(rank0_events=_started(("all_reduce", "snippet"), iteration=1)
                 + _started(("all_reduce", "snippet"), ("all_reduce", "snippet"), iteration=2))
    assert check(exp(collectives={"op": "all_reduce", "iteration": 2, "count": 2}), res).passed
    assert check(exp(collectives={"op": "all_reduce", "count": 3}), res).passed


def test_collectives_can_count_only_the_calls_to_or_from_a_ring_neighbour() -> None:
    def sends(*peers: int) -> list[dict[str, Any]]:
        return [{"kind": "collective_start", "op": "send", "source": "snippet", "iteration": None,
                 "t_ms": 1.0, "peer": p} for p in peers]

    def three_ranks(peers_of: Any) -> RunResult:
        return RunResult.model_validate({
            "outcome": "ok", "diagnosis": "", "world_size": 3, "torch_version": "2.13.0",
            "harness_version": "3",
            "ranks": [{"rank": r, "values": {}, "error": None, "blocked_in": None,
                       "events": sends(*peers_of(r))} for r in range(3)]})

    ring = three_ranks(lambda r: [(r + 1) % 3] * 2)
    direct = three_ranks(lambda r: [q for q in range(3) if q != r])
    only_next = exp(collectives={"rank": "all", "op": "send", "peer": "not_next", "count": 0})
    assert check(only_next, ring).passed
    got = check(only_next, direct)
    assert not got.passed and got.per_rank == {0: (1, False), 1: (1, False), 2: (1, False)}
    assert got.expected == "send entered exactly 0 times toward a rank other than the next on every rank"
    assert check(exp(collectives={"rank": 2, "op": "send", "peer": "next", "count": 2}), ring).passed
    assert check(exp(collectives={"rank": 0, "op": "send", "peer": "previous", "count": 1}),
                 direct).passed


def test_bytes_compare_with_a_relative_tolerance_bounds_or_another_ranks_bytes() -> None:
    res = result(rank0_bytes_sent=1_050_000, rank1_bytes_sent=2_100)
    near = check(exp(bytes={"equals": 2**20}), res)
    assert near.passed and near.expected == "bytes sent = 1,048,576 (±5%) on rank 0"
    assert not check(exp(bytes={"equals": 2**20, "tol": 0.001}), res).passed
    assert check(exp(bytes={"rank": 1, "at_most": 65536}), res).passed
    assert not check(exp(bytes={"rank": "all", "at_least": 65536}), res).passed
    ratio = check(exp(bytes={"rank": 0, "ratio_to": {"rank": 1}, "equals": 500, "tol": 0.01}), res)
    assert ratio.passed and ratio.per_rank == {0: (500.0, True)}
    silent = result(rank0_bytes_sent=10, rank1_bytes_sent=0)
    nothing = check(exp(bytes={"rank": 0, "ratio_to": {"rank": 1}, "equals": 1}), silent)
    assert not nothing.passed and "rank 1 sent nothing" in nothing.measured


@pytest.mark.parametrize("body", [
    {"collectives": {"op": "all_reduce"}},
    {"collectives": {"op": "all_reduce", "count": 1, "at_most": 2}},
    {"bytes": {"at_most": 1, "at_least": 0}},
    {"bytes": {"ratio_to": {"rank": 1}, "at_most": 2}},
    {"collectives": {"op": "all_reduce", "count": -1}},
])
def test_collectives_and_bytes_take_exactly_one_bound(body: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        exp(**body)
