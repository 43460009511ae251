"""The SVG pictures escape every piece of text they are given, and never show a label cut."""

from __future__ import annotations

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
    # F0 fits its block; B0 does not and goes on the row above; the long label fits nowhere.
    assert blocks[0].select_one("text.block-label").get_text() == "F0"  # type: ignore[union-attr]
    assert "above" in blocks[1].select_one("text.block-label")["class"]  # type: ignore[index]
    assert blocks[2].select_one("text") is None and blocks[2].title.get_text() == PAYLOAD  # type: ignore[union-attr]
