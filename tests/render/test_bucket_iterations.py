"""The bucket charts are grouped by iteration; a run with many iterations offers the first few and
the ones the question asks about, and says it shows only some. One end marker per rank."""

from __future__ import annotations

from app.questions.schema import QuestionDoc
from app.render.runs import MAX_BUCKET_ITERATIONS, bucket_iterations, rank_lanes
from app.verify.engine.result import RunResult


def _result(iterations: int, events: list[dict] | None = None) -> RunResult:
    buckets = [{"rank": r, "iteration": i, "index": 0, "params": ["w"], "bytes": 8,
                "first_ready_ms": 10.0 * i, "last_ready_ms": 10.0 * i + 1,
                "reduce_start_ms": 10.0 * i + 1, "reduce_end_ms": 10.0 * i + 2}
               for i in range(1, iterations + 1) for r in (0, 1)]
    ranks = [{"rank": r, "events": events or [], "values": {}, "exit_code": 0} for r in (0, 1)]
    return RunResult.model_validate({
        "outcome": "ok", "diagnosis": "", "world_size": 2, "torch_version": "t",
        "harness_version": "h", "ranks": ranks, "buckets": buckets})


def _doc_asking_about(iteration: int) -> QuestionDoc:
    return QuestionDoc.model_validate({
        "slug": "q", "topic": "t", "title": "T", "difficulty": 1, "type": "numeric",
        "prompt": "p", "explanation": "e", "answer": {"value": 1},
        "verify": {"snippet": "s.py", "expect": [
            {"label": "one reduction", "bucket_count": {"rank": 0, "iteration": iteration,
                                                        "count": 1}}]}}
    ).model_copy(update={"snippet_text": "pass\n"})


def test_a_short_run_shows_every_iteration() -> None:
    it = bucket_iterations(_result(3))
    assert [i for i, _ in it.shown] == [1, 2, 3] and it.total == 3 and not it.partial
    assert all(len(views) == 2 for _, views in it.shown)  # one chart per rank


def test_a_long_run_says_it_shows_only_some_and_keeps_the_asked_iteration() -> None:
    total = MAX_BUCKET_ITERATIONS + 8
    it = bucket_iterations(_result(total), _doc_asking_about(total))
    assert it.partial and it.total == total
    shown = [i for i, _ in it.shown]
    assert shown[:MAX_BUCKET_ITERATIONS] == list(range(1, MAX_BUCKET_ITERATIONS + 1))
    assert shown[-1] == total and it.asked == [total]


def test_a_rank_that_finished_has_one_end_marker() -> None:
    events = [{"kind": "snippet_end", "t_ms": 5.0}, {"kind": "exit", "t_ms": 6.0, "exit_code": 0}]
    lanes, _ = rank_lanes(_result(1, events))
    assert [[m.kind for m in lane.marks] for lane in lanes] == [["exit"], ["exit"]]
    raised = [{"kind": "exception", "t_ms": 4.0, "type": "RuntimeError", "message": "x"},
              {"kind": "exit", "t_ms": 6.0, "exit_code": 1}]
    lanes, _ = rank_lanes(_result(1, raised))
    assert [[m.kind for m in lane.marks] for lane in lanes] == [["error"], ["error"]]
