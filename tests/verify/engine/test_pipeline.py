"""Pipeline stages on real gloo ranks: per micro-batch blocks, their order per schedule, the bubble."""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup

from app.render.runs import pipeline_picture, timeline_picture
from app.verify.engine.result import RankResult, RunResult
from app.verify.engine.runner import pipeline_lanes
from tests.verify.helpers import Run, events

PIPELINE = """
import torch, torch.nn as nn
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe, Schedule1F1B
torch.manual_seed(0)
layers = [nn.Sequential(nn.Linear(64, 64), nn.ReLU()) for _ in range(world_size)]
stage = PipelineStage(layers[rank], rank, world_size, torch.device("cpu"))
cls = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}[params["schedule"]]
schedule = cls(stage, n_microbatches=4, loss_fn=lambda out, target: out.pow(2).mean())
x = torch.randn(8, 64)
if rank == 0:
    schedule.step(x)
else:
    losses = []
    schedule.step(target=torch.zeros(8, 64), losses=losses)
    report("losses", len(losses))
"""

# What each schedule does on 2 stages with 4 micro-batches, per rank (= stage).
ORDERS = {
    # GPipe: every forward, then every backward.
    "gpipe": [["F0", "F1", "F2", "F3", "B0", "B1", "B2", "B3"]] * 2,
    # 1F1B: stage 0 warms up with two forwards, then alternates; the last stage alternates at once.
    "1f1b": [["F0", "F1", "B0", "F2", "B1", "F3", "B2", "B3"],
             ["F0", "B0", "F1", "B1", "F2", "B2", "F3", "B3"]],
}


def _order(result: RunResult, rank: int) -> list[str]:
    lane = next(p for p in result.pipeline if p.rank == rank)
    return [("F" if b.kind == "forward" else "B") + str(b.microbatch) for b in lane.blocks]


@pytest.mark.parametrize("schedule", sorted(ORDERS))
def test_each_schedule_runs_its_blocks_in_its_order_on_every_lane(run: Run, schedule: str) -> None:
    result = run(PIPELINE, params={"schedule": schedule}, timeout_s=60)
    assert result.outcome == "ok", result.diagnosis
    assert result.ranks[1].values["losses"] == 4
    assert [_order(result, rank) for rank in range(2)] == ORDERS[schedule]
    for lane in result.pipeline:
        assert lane.stages == [lane.rank]
        assert all(b.end_ms is not None and b.start_ms <= b.end_ms and b.error is None for b in lane.blocks)
        # Blocks of one stage never overlap: each starts after the previous one ended.
        assert all(a.end_ms <= b.start_ms for a, b in zip(lane.blocks, lane.blocks[1:], strict=False))
        assert lane.span_ms == pytest.approx(lane.blocks[-1].end_ms - lane.blocks[0].start_ms, abs=2e-3)
        assert 0 < lane.busy_ms < lane.span_ms and 0 < lane.bubble_fraction < 1
        assert lane.bubble_fraction == pytest.approx(1 - lane.busy_ms / lane.span_ms, abs=1e-3)
    # The activations between the stages are sent as collectives, not hidden in the blocks.
    assert any(e["op"] in ("isend", "batch_isend_irecv") for e in events(result, 0, "collective_start"))
    RunResult.model_validate_json(result.model_dump_json())


def test_the_timeline_draws_one_pipeline_lane_per_rank_with_readable_whole_labels(run: Run) -> None:
    result = run(PIPELINE, params={"schedule": "1f1b"}, timeout_s=60)
    assert result.outcome == "ok", result.diagnosis
    pictures = str(timeline_picture(result, svg_id="t")) + str(pipeline_picture(result, svg_id="t-pipeline"))
    soup = BeautifulSoup(pictures, "html.parser")
    svg = soup.select_one("svg#t-pipeline")
    assert svg is not None and "pipeline" in svg["class"]
    assert svg.select_one(":scope > title").text.startswith("Pipeline stages")  # type: ignore[union-attr]
    desc = svg.select_one(":scope > desc").text  # type: ignore[union-attr]
    assert "rank 0 (stage 0): F0 F1 B0 F2 B1 F3 B2 B3" in desc
    lanes = svg.select("g.lane")
    assert [lane.select_one("text.lane-label").text for lane in lanes] == ["rank 0", "rank 1"]  # type: ignore[union-attr]
    for rank, lane in enumerate(lanes):
        blocks = lane.select("g.block")
        # Left to right, the blocks are the schedule's order; each explains itself in a tooltip.
        blocks.sort(key=lambda g: float(g.rect["x"]))  # type: ignore[index]
        titles = [g.title.text for g in blocks]  # type: ignore[union-attr]
        expected = ORDERS["1f1b"][rank]
        assert len(blocks) == 8
        for title, label in zip(titles, expected, strict=True):
            kind = "forward" if label[0] == "F" else "backward"
            assert title.startswith(f"stage {rank}, micro-batch {label[1]}: {kind} ")
        # Every block is named, whole, inside its box: the picture is in step order, each
        # block as wide as its name.
        for g, label in zip(blocks, expected, strict=True):
            text = g.select_one("text.block-label")
            assert text is not None and text.text == label
        note = lane.select_one("text.lane-note").text  # type: ignore[union-attr]
        assert note.startswith("idle ") and note.endswith("%")
    sizes = [float(t["style"].split("font-size:")[1].rstrip("px;")) for t in svg.select("text")]
    assert sizes and min(sizes) >= 12
    # The run's own timeline draws the sends between the stages, to scale, and leaves the
    # blocks to the picture in step order.
    main = soup.select_one("svg#t")
    assert main is not None and not main.select("g.span.forward") and main.select("g.span.collective")


def _rank(events_: list[dict[str, object]]) -> RankResult:
    return RankResult(rank=0, events=events_)


def test_the_bubble_is_the_idle_share_of_the_span_with_overlaps_counted_once() -> None:
    def block(seq: int, start: float, end: float, kind: str = "forward") -> list[dict[str, object]]:
        return [{"t_ms": start, "kind": f"stage_{kind}_start", "seq": seq, "stage": 0, "microbatch": seq},
                {"t_ms": end, "kind": f"stage_{kind}_end", "seq": seq, "stage": 0, "microbatch": seq}]

    lanes = pipeline_lanes([_rank(block(1, 0, 10) + block(2, 20, 30, "backward") + block(3, 22, 26)
                                  + block(4, 40, 40))])
    (lane,) = lanes
    assert (lane.span_ms, lane.busy_ms) == (40.0, 20.0) and lane.bubble_fraction == 0.5
    assert [b.kind for b in lane.blocks] == ["forward", "backward", "forward", "forward"]
    # A block that never ended is kept (its end unknown) but adds no busy time.
    unfinished = pipeline_lanes([_rank(block(1, 0, 10) + block(2, 15, 25)[:1])])[0]
    assert unfinished.blocks[1].end_ms is None and unfinished.busy_ms == 10.0
    assert pipeline_lanes([_rank([])]) == []
