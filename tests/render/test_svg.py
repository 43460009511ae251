"""The SVG pictures escape every piece of text they are given."""

from __future__ import annotations

from bs4 import BeautifulSoup

from app.render.svg import BucketRow, Lane, Mark, Span, bucket_svg, timeline_svg

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
