"""The SVG pictures escape every piece of text they are given, and never show a label cut."""

from __future__ import annotations

import itertools

from bs4 import BeautifulSoup

from app.render.svg import (
    Block,
    BlockLane,
    BucketRow,
    Lane,
    Mark,
    Span,
    bucket_svg,
    pipeline_svg,
    timeline_svg,
)

PAYLOAD = '</title><script>alert(1)</script><title>"><img src=x onerror=alert(1)>'


def _assert_inert(svg: str) -> None:
    soup = BeautifulSoup(svg, "lxml")
    assert soup.find("script") is None and soup.find("img") is None
    assert not [a for tag in soup.find_all(True) for a in tag.attrs if a.startswith("on")]


def test_bucket_chart_escapes_labels_units_title_and_description() -> None:
    rows = [BucketRow(PAYLOAD, 1, 2, 3, 9)]
    svg = bucket_svg(rows, 5, title=PAYLOAD, desc=PAYLOAD, unit=PAYLOAD)
    _assert_inert(svg)
    assert BeautifulSoup(svg, "lxml").find("title").get_text() == PAYLOAD


def test_timeline_escapes_lane_span_and_mark_text() -> None:
    lane = Lane(PAYLOAD, [Span(0, 5, "collective", PAYLOAD, PAYLOAD)], [Mark(3, "error", PAYLOAD)])
    svg = timeline_svg([lane], 10, title=PAYLOAD, desc=PAYLOAD, unit=PAYLOAD,
                       axis_labels=[(1, PAYLOAD)])
    _assert_inert(svg)


def test_exposed_time_is_what_runs_past_the_end_of_compute() -> None:
    assert BucketRow("A", 3, 6, 6, 11).exposed(18) == 0
    assert BucketRow("B", 5, 17, 17, 22).exposed(18) == 4


def _texts(svg: str) -> list[tuple[str, float]]:
    """(text, font size in px) of every <text>, read from its inline style."""
    soup = BeautifulSoup(svg, "html.parser")
    out = []
    for t in soup.find_all("text"):
        style = t.get("style", "")
        size = float(style.split("font-size:")[1].split("px")[0]) if "font-size:" in style else 0.0
        out.append((t.get_text(), size))
    return out


def test_a_label_too_long_for_its_span_is_left_to_the_tooltip_never_shortened() -> None:
    name = "all_gather_into_tensor"
    lane = Lane("rank 0", [Span(0, 1, "collective", name, f"{name} 0–1 ms"),
                           Span(2, 9, "collective", "barrier", "barrier 2–9 ms")])
    svg = timeline_svg([lane], 10, title="t", desc="d")
    labels = [g.find("text") for g in BeautifulSoup(svg, "html.parser").select("g.span")]
    assert labels[0] is None and labels[1] is not None and labels[1].get_text() == "barrier"
    titles = [g.find("title").get_text() for g in BeautifulSoup(svg, "html.parser").select("g.span")]
    assert titles == [f"{name} 0–1 ms", "barrier 2–9 ms"]
    assert all(size >= 12 for text, size in _texts(svg) if text not in ("■", "✕", "⚡"))


def test_a_stored_traces_step_text_wraps_whole_and_its_lane_grows() -> None:
    sentence = "iteration 3: forward, then backward, then the bucket 0 all-reduce that never returns"
    short = timeline_svg([Lane("a", [Span(0.04, 0.96, "user", "ok")])], 4.0, title="t", desc="d")
    tall = timeline_svg([Lane("a", [Span(0.04, 0.96, "user", sentence)])], 4.0, title="t", desc="d")
    lines = [t.get_text() for t in BeautifulSoup(tall, "html.parser").select("text.span-label")]
    assert len(lines) > 1 and " ".join(lines) == sentence

    def height(svg: str) -> float:
        return float(BeautifulSoup(svg, "html.parser").svg["viewbox"].split()[3])  # type: ignore[index]
    assert height(tall) > height(short)


def test_pipeline_lanes_escape_their_text_and_draw_it_at_twelve_pixels_or_more() -> None:
    lanes = [BlockLane(PAYLOAD, PAYLOAD, [Block(0, 4, "forward", "F0", PAYLOAD),
                                          Block(4.1, 4.2, "backward", "B0", "tiny"),
                                          Block(5, 9, "backward_weight", PAYLOAD, PAYLOAD)])]
    svg = pipeline_svg(lanes, 10, title=PAYLOAD, desc=PAYLOAD, unit=PAYLOAD)
    _assert_inert(svg)
    texts = _texts(svg)
    assert texts and min(size for _, size in texts) >= 12
    soup = BeautifulSoup(svg, "html.parser")
    blocks = soup.select("g.block")
    assert [b["class"][1] for b in blocks] == ["forward", "backward", "backward_weight"]
    # Every block is drawn wide enough for its whole name, however short it ran.
    assert [b.select_one("text.block-label").get_text() for b in blocks] == ["F0", "B0", PAYLOAD]  # type: ignore[union-attr]


def _block_boxes(svg: str) -> list[tuple[str, float, float]]:
    soup = BeautifulSoup(svg, "html.parser")
    return [(g.select_one("text.block-label").get_text(), float(g.rect["x"]), float(g.rect["width"]))  # type: ignore[union-attr,index,arg-type]
            for g in soup.select("g.block")]


def test_pipeline_blocks_are_laid_out_in_step_order_each_wide_enough_for_its_label() -> None:
    # 1F1B on two stages, roughly as measured: blocks of 0-2 ms, far apart, in a 150 ms step.
    order = {0: ["F0", "F1", "B0", "F2", "B1", "F3", "B2", "B3"],
             1: ["F0", "B0", "F1", "B1", "F2", "B2", "F3", "B3"]}
    lanes = []
    for rank, names in order.items():
        t, blocks = 40.0 * rank, []  # the last stage waits for its first input
        for name in names:
            length = 0.0 if name == "B3" and rank == 1 else (0.3 if name[0] == "F" else 1.7)
            blocks.append(Block(t, t + length, "forward" if name[0] == "F" else "backward", name, name))
            t += length + 9.0
        lanes.append(BlockLane(f"rank {rank}", "idle 80%", blocks))
    svg = pipeline_svg(lanes, 120, title="t", desc="d")
    soup = BeautifulSoup(svg, "html.parser")
    for lane, (rank, names) in zip(soup.select("g.lane"), order.items(), strict=True):
        boxes = sorted(_block_boxes(str(lane)), key=lambda b: b[1])
        assert [name for name, _x, _w in boxes] == names  # left to right is the order they ran
        for name, _x, w in boxes:
            assert w >= len(name) * 7, (rank, name, w)  # the whole label fits inside its block
        # Never overlapping on one lane.
        assert all(a[1] + a[2] <= b[1] + 0.05 for a, b in itertools.pairwise(boxes))
    # Time where nothing runs on any lane is compressed and marked, not drawn to scale.
    gaps = soup.select("g.idle-gap")
    assert gaps and all(float(g.rect["width"]) <= 16 for g in gaps)  # type: ignore[index]
    assert all("≈" in g.get_text() for g in gaps)
    # The picture is as wide as it needs and says so (a width attribute), never squeezed.
    width = float(soup.svg["width"])  # type: ignore[index]
    assert width == float(soup.svg["viewbox"].split()[2]) and width < 720  # type: ignore[index]
    assert min(size for _, size in _texts(svg)) >= 12


def test_ops_too_narrow_to_name_inside_are_named_once_above_their_lane() -> None:
    gathers = [Span(10 + i, 10.4 + i, "collective", "all_gather", f"all_gather {i}") for i in range(4)]
    scatter = [Span(60, 60.3, "collective", "reduce_scatter", "reduce_scatter")]
    lane = Lane("rank 0", [Span(0, 40, "forward", "fwd"), *gathers, *scatter])
    soup = BeautifulSoup(timeline_svg([lane], 150, title="t", desc="d"), "html.parser")
    names = [t.get_text() for t in soup.select("g.op-name text")]
    assert names == ["all_gather ×4", "reduce_scatter"]
    assert min(size for _, size in _texts(str(soup))) >= 12


def test_a_wait_for_a_peer_is_drawn_as_waiting_then_the_collective() -> None:
    lane = Lane("rank 0", [Span(0, 150, "waiting", "waiting", "waited 150 ms for rank 1"),
                           Span(150, 152, "collective", "all_reduce", "all_reduce")])
    soup = BeautifulSoup(timeline_svg([lane], 200, title="t", desc="d"), "html.parser")
    waiting = soup.select_one("g.span.waiting")
    assert waiting is not None and "waited 150 ms for rank 1" in waiting.title.get_text()  # type: ignore[union-attr]
    assert waiting.select_one("text").get_text() == "waiting"  # type: ignore[union-attr]
    assert waiting.rect["stroke-dasharray"]  # type: ignore[index]
