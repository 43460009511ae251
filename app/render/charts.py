"""Server-rendered SVG charts for the progress dashboard: bars, a line, a calendar heatmap.

Like svg.py, each takes plain data and returns markup with a <title> and <desc>; the
templates put a table beside every chart as its text fallback. The charts are drawn
320 units wide, a little less than the room a card leaves at 390 px, so on a phone they
are drawn at least at their own scale and their 12-unit text stays 12 CSS px or more.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from html import escape

from markupsafe import Markup

W = 320
PAD = 8


def _head(svg_id: str, cls: str, height: float, title: str, desc: str) -> list[str]:
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {height:.0f}" class="chart {cls}" '
        f'role="img" aria-labelledby="{svg_id}-t {svg_id}-d" id="{svg_id}">',
        f'<title id="{svg_id}-t">{escape(title)}</title>',
        f'<desc id="{svg_id}-d">{escape(desc)}</desc>',
    ]


def _pct(v: float) -> str:
    return f"{round(v * 100)}%"


@dataclass
class Bar:
    label: str
    value: float  # 0..1
    # A second value drawn as a tick on the bar (the readiness with the plan), and its name.
    mark: float | None = None
    mark_name: str = ""


BAR_H = 14
ROW_H = 34


def bar_chart(bars: list[Bar], *, title: str, desc: str, svg_id: str,
              target: float | None = None) -> Markup:
    """Horizontal bars of fractions (0..1), each labelled above its bar with its percentage;
    an optional dashed line marks a target."""
    height = PAD * 2 + max(1, len(bars)) * ROW_H + 12
    inner = W - 2 * PAD - 40
    parts = _head(svg_id, "bar-chart", height, title, desc)
    for i, b in enumerate(bars):
        y = PAD + i * ROW_H
        v = min(max(b.value, 0.0), 1.0)
        extra = f"; {b.mark_name} {_pct(b.mark)}" if b.mark is not None else ""
        parts.append(f'<g class="bar"><title>{escape(b.label)}: {_pct(v)}{escape(extra)}</title>')
        parts.append(f'<text x="{PAD}" y="{y + 11}" class="bar-label">{escape(b.label)}</text>')
        parts.append(f'<rect x="{PAD}" y="{y + 15}" width="{inner}" height="{BAR_H}" rx="2" '
                     f'class="bar-track" fill="#eef0f4"/>')
        parts.append(f'<rect x="{PAD}" y="{y + 15}" width="{inner * v:.1f}" height="{BAR_H}" rx="2" '
                     f'class="bar-fill" fill="#3b6fd8"/>')
        if b.mark is not None:
            mx = PAD + inner * min(max(b.mark, 0.0), 1.0)
            parts.append(f'<rect x="{mx - 1.5:.1f}" y="{y + 12}" width="3" height="{BAR_H + 6}" '
                         f'class="bar-mark" fill="#1d2330"/>')
        parts.append(f'<text x="{W - PAD}" y="{y + 26}" text-anchor="end" class="bar-value">'
                     f'{_pct(v)}</text></g>')
    if target is not None:
        x = PAD + inner * target
        parts.append(f'<line x1="{x:.1f}" y1="{PAD}" x2="{x:.1f}" y2="{PAD + len(bars) * ROW_H}" '
                     f'class="target" stroke="#b45309" stroke-dasharray="4 3"/>')
        parts.append(f'<text x="{x:.1f}" y="{height - 4}" text-anchor="middle" class="tick">'
                     f'target {_pct(target)}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def line_chart(points: list[tuple[str, float | None]], *, title: str, desc: str,
               svg_id: str) -> Markup:
    """A line through fractions (0..1) at evenly spaced labelled points; a point with no value
    (no attempts that week) breaks the line rather than pretending to be 0."""
    height = 170
    left, right, top, bottom = 40, W - PAD, PAD + 4, height - 28
    n = max(1, len(points) - 1)

    def x(i: int) -> float:
        return left + (right - left) * i / n

    def y(v: float) -> float:
        return bottom - (bottom - top) * v

    parts = _head(svg_id, "line-chart", height, title, desc)
    for v in (0.0, 0.5, 1.0):
        parts.append(f'<line x1="{left}" y1="{y(v):.1f}" x2="{right}" y2="{y(v):.1f}" '
                     f'class="grid" stroke="#eef0f4"/>')
        parts.append(f'<text x="{left - 4}" y="{y(v) + 4:.1f}" text-anchor="end" class="tick">'
                     f'{_pct(v)}</text>')
    segment: list[str] = []
    segments: list[list[str]] = []
    for i, (_label, value) in enumerate(points):
        if value is None:
            if segment:
                segments.append(segment)
            segment = []
            continue
        segment.append(f"{x(i):.1f},{y(value):.1f}")
    if segment:
        segments.append(segment)
    for seg in segments:
        parts.append(f'<polyline points="{" ".join(seg)}" fill="none" stroke="#3b6fd8" '
                     f'stroke-width="2" class="line"/>')
    step = max(1, len(points) // 4)
    for i, (label, point) in enumerate(points):
        if point is not None:
            parts.append(f'<g class="point"><title>{escape(label)}: {_pct(point)}</title>'
                         f'<circle cx="{x(i):.1f}" cy="{y(point):.1f}" r="3.5" fill="#3b6fd8"/></g>')
        last = len(points) - 1
        # Every step-th label and the last one, unless the two would run into each other.
        if (i % step == 0 and last - i >= step) or i == last:
            # The first and last labels hang inwards: centred on the edge they were cut off.
            anchor = "start" if i == 0 else "end" if i == len(points) - 1 else "middle"
            parts.append(f'<text x="{x(i):.1f}" y="{height - 10}" text-anchor="{anchor}" '
                         f'class="tick">{escape(label)}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


# Room for the weekday names (Mon, Wed, Fri at 12 px) left of the squares.
DAY_LABEL_W = 32
HEAT_COLOURS = ("#eef0f4", "#c6dbf7", "#8fb3ee", "#3b6fd8", "#1e4aa8")


def heat_level(count: int) -> int:
    """0 for no practice, then 1..4 for 1-2, 3-5, 6-10 and more than 10 answers in a day."""
    if count <= 0:
        return 0
    return 1 if count <= 2 else 2 if count <= 5 else 3 if count <= 10 else 4


def heatmap(counts: dict[date, int], start: date, end: date, *, title: str, desc: str,
            svg_id: str) -> Markup:
    """A calendar of days practised: a column per week (from the Monday `start`), a row per
    weekday, each square shaded by the number of answers that day."""
    weeks = (end - start).days // 7 + 1
    cell = min(18.0, (W - 2 * PAD - DAY_LABEL_W) / weeks)
    height = PAD * 2 + 7 * cell + 16
    parts = _head(svg_id, "heatmap", height, title, desc)
    for row, name in ((0, "Mon"), (2, "Wed"), (4, "Fri")):
        parts.append(f'<text x="{PAD}" y="{PAD + row * cell + cell * 0.75:.1f}" class="tick">'
                     f'{name}</text>')
    d = start
    while d <= end:
        col, row = (d - start).days // 7, d.weekday()
        n = counts.get(d, 0)
        parts.append(f'<rect x="{PAD + DAY_LABEL_W + col * cell:.1f}" y="{PAD + row * cell:.1f}" '
                     f'width="{cell - 2:.1f}" height="{cell - 2:.1f}" rx="2" '
                     f'fill="{HEAT_COLOURS[heat_level(n)]}" class="day l{heat_level(n)}" '
                     f'data-date="{d.isoformat()}"><title>{d.isoformat()}: {n} answer'
                     f'{"" if n == 1 else "s"}</title></rect>')
        d += timedelta(days=1)
    first_months = [(start + timedelta(weeks=i)) for i in range(weeks)]
    last_month = None
    for i, monday in enumerate(first_months):
        if monday.month != last_month and i < weeks - 1:
            parts.append(f'<text x="{PAD + DAY_LABEL_W + i * cell:.1f}" y="{height - 4}" class="tick">'
                         f'{monday.strftime("%b")}</text>')
            last_month = monday.month
    parts.append("</svg>")
    return Markup("".join(parts))
