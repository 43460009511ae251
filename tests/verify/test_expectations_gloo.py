"""The `collectives` and `bytes` checks against real gloo runs of a snippet in tests/fixtures,
executed by the engine (two ranks, the sandbox as configured)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.questions.schema import Expectation
from app.verify.engine import Limits, RunResult, get_engine
from app.verify.expectations import check

SNIPPET = Path(__file__).resolve().parents[1] / "fixtures" / "checks" / "collectives_and_bytes.py"


@pytest.fixture(scope="module")
def measured() -> RunResult:
    result = get_engine().run(SNIPPET.read_text(), world_size=2, params={},
                              limits=Limits(timeout_s=30))
    assert result.outcome == "ok", result.diagnosis
    return result


def passes(result: RunResult, **body: Any) -> bool:
    return check(Expectation.model_validate({"label": "x", **body}), result).passed


def test_collectives_counts_what_the_snippet_called_on_each_rank(measured: RunResult) -> None:
    assert passes(measured, collectives={"rank": "all", "op": "all_reduce", "count": 3})
    assert passes(measured, collectives={"rank": "all", "op": "all_reduce", "count": 3, "source": "snippet"})
    assert not passes(measured, collectives={"rank": "all", "op": "all_reduce", "count": 4})
    assert passes(measured, collectives={"rank": 0, "op": "send", "count": 1})
    assert passes(measured, collectives={"rank": 0, "op": "recv", "count": 0})
    assert passes(measured, collectives={"rank": 1, "op": "recv", "at_least": 1})
    assert passes(measured, collectives={"rank": "all", "op": "barrier", "at_most": 1})


def test_collectives_tells_torch_issued_calls_from_the_snippets(measured: RunResult) -> None:
    # ZeroRedundancyOptimizer.step broadcasts the updated shards itself.
    assert passes(measured, collectives={"rank": "all", "op": "broadcast", "count": 2, "source": "torch"})
    assert passes(measured, collectives={"rank": "all", "op": "broadcast", "count": 0, "source": "snippet"})
    assert passes(measured, collectives={"rank": "all", "op": "broadcast", "count": 2})


def test_bytes_reads_what_each_rank_put_on_gloos_sockets(measured: RunResult) -> None:
    # Rank 0 sends rank 1 a MiB of float32 zeros; rank 1 sends only small collectives.
    assert passes(measured, bytes={"rank": 0, "equals": 2**20})
    assert not passes(measured, bytes={"rank": 1, "equals": 2**20})
    assert passes(measured, bytes={"rank": 1, "at_most": 64 * 1024})
    assert passes(measured, bytes={"rank": "all", "at_least": 256})
    assert not passes(measured, bytes={"rank": "all", "at_least": 2**19})
    ratio = measured.ranks[0].bytes_sent / measured.ranks[1].bytes_sent
    assert ratio > 100
    assert passes(measured, bytes={"rank": 0, "ratio_to": {"rank": 1}, "equals": ratio, "tol": 0.001})
    assert not passes(measured, bytes={"rank": 1, "ratio_to": {"rank": 0}, "equals": 1})
