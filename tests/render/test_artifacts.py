"""Artifacts produced on real gloo ranks by the bank's own snippets — a torch.profiler trace of a
DDP step, three ranks' flight-recorder dumps, a memory account from saved-tensor hooks — drawn
server-side: the SVG and the table fallback, parsed, say what the run recorded."""

from __future__ import annotations

from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from app.questions.schema import ArtifactTrace, Expectation
from app.render.artifacts import artifact_picture, flight_sequences, profile_rows, run_artifacts
from app.templating import templates
from app.verify.engine import Limits, RunResult, get_engine
from app.verify.engine.artifacts import FlightRecorderArtifact, MemoryArtifact, ProfileArtifact
from app.verify.expectations import check

EVIDENCE = Path(__file__).resolve().parents[2] / "question_bank" / "reading-evidence"


def _run(snippet: str, world_size: int, **params: object) -> RunResult:
    result = get_engine().run((EVIDENCE / snippet).read_text(), world_size=world_size,
                              params=dict(params), limits=Limits(timeout_s=60))
    assert result.outcome == "ok", result.diagnosis
    return result


@pytest.fixture(scope="module")
def profiled() -> RunResult:
    return _run("profile_ddp_step.py", 2, bucket_cap_mb=1)


@pytest.fixture(scope="module")
def dumped() -> RunResult:
    return _run("flight_recorder_op_mismatch.py", 3)


@pytest.fixture(scope="module")
def accounted() -> RunResult:
    return _run("memory_saved_tensors.py", 1, activation="relu", tokens=512)


def _partial(name: str, ranks: list, source: object = None) -> BeautifulSoup:
    html = templates.env.get_template("render/_artifact.html").render(
        art_name=name, art_ranks=ranks, art_caption="", art_id="t", art_source=source)
    return BeautifulSoup(html, "html.parser")


def test_a_ddp_profile_is_drawn_as_lanes_of_the_main_thread_and_gloos_workers(profiled: RunResult) -> None:
    ranks = run_artifacts(profiled)["step"]
    assert [r.rank for r in ranks] == [0, 1]
    art = ranks[0].artifact
    assert isinstance(art, ProfileArtifact)
    svg = BeautifulSoup(artifact_picture(ranks[:1], title="step", svg_id="p"), "html.parser").svg
    assert svg is not None and svg.title.text == "step" and "6 gloo collectives" in svg.desc.text
    lanes = [t.text for t in svg.select("text.lane-label")]
    assert lanes[0] == "main" and any(label.startswith("gloo") for label in lanes)
    collectives = svg.select("g.span.collective")
    assert len(collectives) == 6
    assert all(g.title.text.startswith("gloo:all_reduce (gloo collective)") for g in collectives)
    assert len(svg.select("g.span.backward")) == 13  # the sum's, then AddmmBackward0 and TBackward0 per layer
    # Nested spans (the linear layers inside DDP's forward) get rows of their own.
    assert [label for label, _ in profile_rows(art)][:2] == ["main", "main ·2"]
    table = _partial("step", ranks[:1]).select("table.artifact-spans tbody tr")
    assert len(table) == len(art.spans)
    assert any("gloo:all_reduce" in tr.text and "gloo collective" in tr.text for tr in table)


def test_flight_recorder_dumps_line_up_by_sequence_number_with_op_and_snippet_line(dumped: RunResult) -> None:
    ranks = run_artifacts(dumped)["dump"]
    assert all(isinstance(r.artifact, FlightRecorderArtifact) for r in ranks)
    assert flight_sequences(ranks) == [1, 2, 3, 4]
    svg = BeautifulSoup(artifact_picture(ranks, title="dumps", svg_id="f"), "html.parser").svg
    assert [t.text for t in svg.select("text.lane-label")] == ["rank 0", "rank 1", "rank 2"]
    assert [t.text for t in svg.select("text.tick")][:4] == ["#1", "#2", "#3", "#4"]
    boxes = [g.title.text for g in svg.select("g.span.collective")]
    assert len(boxes) == 12 and "rank 1, #4 gloo:broadcast" in " ".join(boxes)
    cells = _partial("dump", ranks).select("table.artifact-entries td")
    by = {(td["data-rank"], td["data-seq"]): " ".join(td.get_text(" ").split()) for td in cells}
    assert by[("1", "4")] == "broadcast [16] line 22, 28"
    assert by[("0", "4")] == "all_reduce [16] line 18, 30"


def test_a_memory_account_draws_a_bar_per_tensor_and_an_outline_for_shared_storage(
        accounted: RunResult) -> None:
    ranks = run_artifacts(accounted)["memory"]
    art = ranks[0].artifact
    assert isinstance(art, MemoryArtifact)
    assert art.total("saved for backward") == 2 * 2**20 + 2**19  # ReLU's output and linear 1's input
    svg = BeautifulSoup(artifact_picture(ranks, title="memory", svg_id="m"), "html.parser").svg
    assert svg["viewbox"] == f"0 0 320 {svg['viewbox'].split()[-1]}"  # phone width, like the charts
    assert [t.text for t in svg.select("text.group")] == ["parameter", "saved for backward"]
    assert len(svg.select("g.memory-row")) == len(art.rows) == 8
    assert len(svg.select("rect.bar-shared")) == 2  # linear 2's weight and its input
    assert "saved for backward: 4 tensors, 2.50 MiB" in svg.desc.text
    rows = _partial("memory", ranks).select("table.artifact-rows tbody tr")
    assert any("the same storage as relu's saved tensor" in tr.text for tr in rows)


def test_an_artifact_check_passes_on_the_same_run_and_names_where_a_stored_copy_differs(
        dumped: RunResult) -> None:
    ranks = run_artifacts(dumped)["dump"]
    trace = ArtifactTrace.model_validate({"kind": "artifact", "name": "dump",
                                          "ranks": [r.model_dump() for r in ranks]})
    exp = Expectation.model_validate({"label": "same", "artifact": {"name": "dump"}})
    assert check(exp, dumped, trace=trace).passed
    drawn = trace.model_dump()
    drawn["ranks"][1]["artifact"]["entries"][3]["op"] = "gloo:all_reduce"  # a hand-made "fix"
    result = check(exp, dumped, trace=ArtifactTrace.model_validate(drawn))
    assert not result.passed
    assert "rank 1: differs" in result.measured and "gloo:broadcast" in result.measured
    assert not check(exp, dumped, trace=None).passed
