"""The dashboard's SVG charts: titles and descriptions, values drawn to scale, gaps kept."""

from __future__ import annotations

from datetime import date, timedelta

from bs4 import BeautifulSoup

from app.render.charts import Bar, bar_chart, heat_level, heatmap, line_chart


def _svg(markup: str) -> BeautifulSoup:
    return BeautifulSoup(str(markup), "html.parser")


def test_a_bar_chart_has_a_title_a_description_and_bars_to_scale() -> None:
    svg = _svg(bar_chart([Bar("A & B", 0.5), Bar("C", 1.2), Bar("D", -1)], title="T <1>",
                         desc="D", svg_id="x", target=0.9))
    root = svg.select_one("svg#x")
    assert root is not None and root["role"] == "img"
    assert root.select_one(":scope > title").text == "T <1>"  # type: ignore[union-attr]
    widths = [float(r["width"]) for r in svg.select("rect.bar-fill")]
    track = float(svg.select_one("rect.bar-track")["width"])  # type: ignore[index]
    assert widths == [track * 0.5, track, 0.0]  # clamped to 0..1
    assert [t.text for t in svg.select("text.bar-value")] == ["50%", "100%", "0%"]
    assert svg.select_one("text.bar-label").text == "A & B"  # type: ignore[union-attr]
    assert svg.select_one("line.target") is not None


def test_a_line_chart_breaks_where_a_week_has_no_answers() -> None:
    svg = _svg(line_chart([("w1", 0.5), ("w2", None), ("w3", 1.0), ("w4", 0.0)],
                          title="t", desc="d", svg_id="acc"))
    lines = svg.select("polyline.line")
    assert [len(p["points"].split()) for p in lines] == [1, 2]
    assert len(svg.select("g.point")) == 3


def test_the_heatmap_has_one_square_a_day_shaded_by_answers() -> None:
    start = date(2026, 1, 5)  # a Monday
    end = start + timedelta(days=20)
    counts = {start: 1, start + timedelta(days=1): 4, start + timedelta(days=2): 11}
    svg = _svg(heatmap(counts, start, end, title="t", desc="d", svg_id="h"))
    days = svg.select("rect.day")
    assert len(days) == 21
    levels = {r["data-date"]: r["class"][1] for r in days}
    assert levels["2026-01-05"] == "l1" and levels["2026-01-06"] == "l2"
    assert levels["2026-01-07"] == "l4" and levels["2026-01-08"] == "l0"
    assert [heat_level(n) for n in (0, 1, 2, 3, 5, 6, 10, 11)] == [0, 1, 1, 2, 2, 3, 3, 4]
