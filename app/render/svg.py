"""Server-rendered SVG pictures: a per-rank timeline, a gradient-bucket chart, pipeline stage lanes.

Both take plain data (lanes of spans, rows of bucket windows) so a measured run
and a question's stored trace are drawn by the same code. Every picture has a
<title> and <desc>; the templates put a table beside it as the text fallback.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from html import escape

from markupsafe import Markup

WIDTH = 720
LABEL_W = 70
LANE_H = 34
# Tick numbers on one line, the unit on its own line below them (never over a tick).
AXIS_H = 40
PAD = 8

# Span kinds and their fill colours (also used by the legend in the templates).
COLOURS = {
    "forward": "#93c5fd",
    "backward": "#fcd34d",
    "backward_input": "#fcd34d",
    "backward_weight": "#fde68a",
    "collective": "#86efac",
    "blocked": "#fca5a5",
    "user": "#e5e7eb",
    "ready": "#c7d2fe",
    "reduce": "#6ee7b7",
    "exposed": "#f87171",
}


@dataclass
class Span:
    start: float
    end: float
    kind: str
    label: str = ""
    title: str = ""


@dataclass
class Mark:
    t: float
    kind: str  # "exit", "error", "kill"
    label: str = ""


@dataclass
class Lane:
    label: str
    spans: list[Span] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)


def _ticks(t_max: float) -> list[float]:
    if t_max <= 0:
        return [0.0]
    raw = t_max / 6
    mag = 10 ** len(str(int(raw))) / 10 if raw >= 1 else 0.1
    step = next((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), 10 * mag)
    ticks, t = [], 0.0
    while t <= t_max + 1e-9:
        ticks.append(round(t, 6))
        t += step
    return ticks


# Chart text is drawn at this size at least (the stylesheet's own sizes for ticks and span
# labels are smaller), and one of its characters is roughly CHAR_W wide.
FONT_PX = 12
CHAR_W = 7.0
LINE_H = 14
# A step box of a stored trace wraps its text onto at most this many lines (the lane grows).
MAX_LABEL_LINES = 6


def _font() -> str:
    return f'style="font-size:{FONT_PX}px"'


def _wrap(label: str, width: float, max_lines: int = 1) -> list[str]:
    """The label as lines that fit a box `width` wide, or [] if it cannot be shown whole.

    Never shortened: a label that does not fit is left to the box's <title> tooltip.
    """
    room = int((width - 6) / CHAR_W)
    if not label or room < 1:
        return []
    lines: list[str] = []
    for word in label.split():
        if len(word) > room:
            return []
        if lines and len(lines[-1]) + 1 + len(word) <= room:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines if len(lines) <= max_lines else []


def _fmt(t: float) -> str:
    return f"{t:g}" if abs(t) >= 10 or t == int(t) else f"{t:.1f}"


def _axis(x: Callable[[float], float], t_max: float, y: float, unit: str,
          labels: list[tuple[float, str]] | None = None) -> list[str]:
    out = [f'<line x1="{LABEL_W}" y1="{y}" x2="{WIDTH - PAD}" y2="{y}" class="axis" stroke="#9ca3af"/>']
    if labels is not None:
        for t, text in labels:
            out.append(f'<text x="{x(t):.1f}" y="{y + 16}" class="tick" text-anchor="middle" {_font()}>'
                       f'{escape(text)}</text>')
        return out
    for t in _ticks(t_max):
        xx = x(t)
        out.append(f'<line x1="{xx:.1f}" y1="{y}" x2="{xx:.1f}" y2="{y + 4}" class="axis" stroke="#9ca3af"/>')
        # A number centred on a tick near the right edge would be cut off by it.
        anchor = "end" if xx > WIDTH - PAD - 16 else "middle"
        out.append(f'<text x="{xx:.1f}" y="{y + 16}" class="tick" text-anchor="{anchor}" {_font()}>'
                   f'{_fmt(t)}</text>')
    # The unit gets a line of its own under the numbers: beside them it ran into the first ones.
    out.append(f'<text x="{LABEL_W}" y="{y + 32}" class="tick unit" {_font()}>{escape(unit)}</text>')
    return out


def _span_lines(span: Span, width: float) -> list[str]:
    # A stored trace's step box is as wide as the step and holds sentences: they wrap. A
    # measured span is an op name in a box as wide as its duration: whole on one line, or not.
    return _wrap(span.label, width, MAX_LABEL_LINES if span.kind == "user" else 1)


def timeline_svg(lanes: list[Lane], t_end: float, *, title: str, desc: str, unit: str = "ms",
                 svg_id: str = "timeline", axis_labels: list[tuple[float, str]] | None = None) -> Markup:
    """One lane per rank: spans as boxes labelled with their op; exits and errors as marks.

    Labels are never shortened: one that does not fit its box is left to the box's
    <title>; a stored trace's step text wraps, and its lane grows to hold it.
    """
    t_max = max(t_end, 1e-3)
    scale = (WIDTH - LABEL_W - PAD) / t_max

    def x(t: float) -> float:
        return LABEL_W + max(0.0, min(t, t_max)) * scale

    def width(s: Span) -> float:
        return max(x(s.end) - x(s.start), 1.5)

    wrapped = [{id(s): _span_lines(s, width(s)) for s in lane.spans} for lane in lanes]
    heights = [max(LANE_H, 16 + LINE_H * max((len(v) for v in lines.values()), default=0))
               for lines in wrapped]
    tops = [PAD + sum(heights[:i]) for i in range(len(lanes))]
    bottom = PAD + sum(heights)
    height = bottom + AXIS_H + PAD
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" '
        f'class="timeline" role="img" aria-labelledby="{svg_id}-t {svg_id}-d" id="{svg_id}">',
        f'<title id="{svg_id}-t">{escape(title)}</title>',
        f'<desc id="{svg_id}-d">{escape(desc)}</desc>',
    ]
    for i, lane in enumerate(lanes):
        y, lane_h = tops[i], heights[i]
        parts.append(f'<g class="lane" data-lane="{i}">')
        parts.append(f'<text x="4" y="{y + lane_h / 2 + 4}" class="lane-label" {_font()}>'
                     f'{escape(lane.label)}</text>')
        parts.append(f'<line x1="{LABEL_W}" y1="{y + lane_h - 2}" x2="{WIDTH - PAD}" '
                     f'y2="{y + lane_h - 2}" class="lane-line"/>')
        for s in sorted(lane.spans, key=lambda s: (s.kind == "collective" or s.kind == "blocked", s.start)):
            x0, w = x(s.start), width(s)
            inner = s.kind in ("collective", "blocked")
            yy, hh = (y + lane_h / 2 - 7, 14) if inner else (y + 4, lane_h - 10)
            fill = COLOURS.get(s.kind, "#ddd")
            cls = f"span {s.kind}"
            parts.append(
                f'<g class="{cls}"><title>{escape(s.title or s.label)}</title>'
                f'<rect x="{x0:.1f}" y="{yy}" width="{w:.1f}" height="{hh}" rx="2" fill="{fill}"'
                + (' stroke="#b91c1c" stroke-width="2"' if s.kind == "blocked" else "")
                + "/>"
            )
            lines = wrapped[i][id(s)]
            first = yy + (hh - len(lines) * LINE_H) / 2 + LINE_H - 3
            for k, text in enumerate(lines):
                parts.append(f'<text x="{x0 + 3:.1f}" y="{first + k * LINE_H:.1f}" class="span-label" '
                             f'{_font()}>{escape(text)}</text>')
            parts.append("</g>")
        for m in lane.marks:
            xx = x(m.t)
            sym = {"error": "✕", "exit": "■", "kill": "⚡"}.get(m.kind, "•")
            parts.append(
                f'<g class="mark {m.kind}"><title>{escape(m.label)}</title>'
                f'<text x="{xx:.1f}" y="{y + lane_h / 2 + 5}" text-anchor="middle" '
                f'class="mark-sym">{sym}</text></g>'
            )
        parts.append("</g>")
    parts.extend(_axis(x, t_max, bottom, unit, axis_labels))
    parts.append("</svg>")
    return Markup("".join(parts))


@dataclass
class BucketRow:
    label: str
    first_ready: float
    last_ready: float
    reduce_start: float
    reduce_end: float

    def exposed(self, compute_end: float) -> float:
        """Communication time after backward compute ended (not hidden under compute)."""
        return max(0.0, self.reduce_end - max(self.reduce_start, compute_end))


def bucket_svg(rows: list[BucketRow], compute_end: float, *, title: str, desc: str,
               unit: str = "ms", svg_id: str = "buckets", shade_exposed: bool = True) -> Markup:
    """Per bucket: its ready window, its reduction, and the part exposed after compute ends."""
    t_max = max([compute_end, *(r.reduce_end for r in rows)]) * 1.05 or 1.0
    scale = (WIDTH - LABEL_W - PAD) / t_max

    def x(t: float) -> float:
        return LABEL_W + max(0.0, t) * scale

    height = len(rows) * LANE_H + AXIS_H + PAD + 4
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" '
        f'class="bucket-chart" role="img" aria-labelledby="{svg_id}-t {svg_id}-d" id="{svg_id}">',
        f'<title id="{svg_id}-t">{escape(title)}</title>',
        f'<desc id="{svg_id}-d">{escape(desc)}</desc>',
        f'<rect x="{LABEL_W}" y="{PAD - 4}" width="{x(compute_end) - LABEL_W:.1f}" '
        f'height="{len(rows) * LANE_H + 4}" class="compute-band" fill="#fef3c7"/>',
    ]
    for i, r in enumerate(rows):
        y = PAD + i * LANE_H
        parts.append(f'<g class="bucket-row"><text x="4" y="{y + LANE_H / 2 + 4}" class="lane-label">'
                     f'{escape(r.label)}</text>')
        parts.append(
            f'<g class="ready"><title>{escape(r.label)}: gradients ready '
            f'{_fmt(r.first_ready)}–{_fmt(r.last_ready)} {escape(unit)}</title>'
            f'<rect x="{x(r.first_ready):.1f}" y="{y + 4}" '
            f'width="{max(x(r.last_ready) - x(r.first_ready), 1.5):.1f}" '
            f'height="10" rx="2" fill="{COLOURS["ready"]}"/></g>'
        )
        parts.append(
            f'<g class="reduce"><title>{escape(r.label)}: all-reduce '
            f'{_fmt(r.reduce_start)}–{_fmt(r.reduce_end)} {escape(unit)}</title>'
            f'<rect x="{x(r.reduce_start):.1f}" y="{y + 16}" '
            f'width="{max(x(r.reduce_end) - x(r.reduce_start), 1.5):.1f}" height="12" rx="2" '
            f'fill="{COLOURS["reduce"]}"/></g>'
        )
        exposed = r.exposed(compute_end)
        if shade_exposed and exposed > 0:
            start = max(r.reduce_start, compute_end)
            parts.append(
                f'<g class="exposed"><title>{escape(r.label)}: {_fmt(exposed)} {escape(unit)} exposed '
                f'after compute ends</title><rect x="{x(start):.1f}" y="{y + 16}" '
                f'width="{max(x(r.reduce_end) - x(start), 1.5):.1f}" height="12" '
                f'fill="url(#hatch-{svg_id})" stroke="{COLOURS["exposed"]}"/></g>'
            )
        parts.append("</g>")
    ce = x(compute_end)
    parts.append(f'<line x1="{ce:.1f}" y1="{PAD - 4}" x2="{ce:.1f}" y2="{PAD + len(rows) * LANE_H}" '
                 f'class="compute-end" stroke="#b45309" stroke-dasharray="4 3"/>')
    parts.append(
        f'<defs><pattern id="hatch-{svg_id}" width="6" height="6" patternUnits="userSpaceOnUse" '
        f'patternTransform="rotate(45)"><rect width="6" height="6" fill="#fecaca"/>'
        f'<line x1="0" y1="0" x2="0" y2="6" stroke="#dc2626" stroke-width="3"/></pattern></defs>'
    )
    parts.extend(_axis(x, t_max, PAD + len(rows) * LANE_H + 4, unit))
    parts.append("</svg>")
    return Markup("".join(parts))


@dataclass
class Block:
    start: float
    end: float
    kind: str  # "forward", "backward", "backward_input", "backward_weight"
    label: str
    title: str


@dataclass
class BlockLane:
    label: str
    note: str = ""  # a second line under the label, e.g. the lane's idle share
    blocks: list[Block] = field(default_factory=list)


BLOCK_LANE_H = 46


def _text(x: float, y: float, text: str, cls: str, anchor: str = "start") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" class="{cls}" text-anchor="{anchor}" {_font()}>'
            f'{escape(text)}</text>')


def pipeline_svg(lanes: list[BlockLane], t_end: float, *, title: str, desc: str, unit: str = "ms",
                 svg_id: str = "pipeline") -> Markup:
    """One lane per rank of pipeline stage blocks (forward, backward), labelled by micro-batch.

    A label goes inside its block when it fits, else on a row above the blocks when it
    does not run into the label before it, else nowhere: every block has a <title>
    with its full description, and no label is ever shortened.
    """
    t_max = max(t_end, 1e-3)
    label_w = LABEL_W + 10
    scale = (WIDTH - label_w - PAD) / t_max

    def x(t: float) -> float:
        return label_w + max(0.0, min(t, t_max)) * scale

    top = PAD + 18  # a line for the chart's own heading
    height = top + len(lanes) * BLOCK_LANE_H + AXIS_H + PAD
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" '
        f'class="timeline pipeline" role="img" aria-labelledby="{svg_id}-t {svg_id}-d" id="{svg_id}">',
        f'<title id="{svg_id}-t">{escape(title)}</title>',
        f'<desc id="{svg_id}-d">{escape(desc)}</desc>',
        _text(4, PAD + 10, title, "chart-heading"),
    ]
    for i, lane in enumerate(lanes):
        y = top + i * BLOCK_LANE_H
        box_y, box_h = y + 17, BLOCK_LANE_H - 21
        parts.append(f'<g class="lane" data-lane="{i}">')
        parts.append(_text(4, y + 20, lane.label, "lane-label"))
        if lane.note:
            parts.append(_text(4, y + 36, lane.note, "lane-note"))
        parts.append(f'<line x1="{label_w}" y1="{y + BLOCK_LANE_H - 2}" x2="{WIDTH - PAD}" '
                     f'y2="{y + BLOCK_LANE_H - 2}" class="lane-line"/>')
        row_free = float(label_w)  # where the row of labels above the blocks is free again
        for b in sorted(lane.blocks, key=lambda b: b.start):
            x0 = x(b.start)
            w = max(x(b.end) - x0, 1.5)
            fill = COLOURS.get(b.kind, COLOURS["backward"])
            parts.append(f'<g class="block {b.kind}"><title>{escape(b.title)}</title>'
                         f'<rect x="{x0:.1f}" y="{box_y}" width="{w:.1f}" height="{box_h}" '
                         f'rx="2" fill="{fill}" stroke="#475569" stroke-width="0.5"/>')
            text_w = len(b.label) * CHAR_W
            if text_w + 4 <= w:
                parts.append(_text(x0 + w / 2, box_y + box_h / 2 + 4, b.label, "block-label", "middle"))
            elif x0 >= row_free and x0 + text_w <= WIDTH - PAD:
                parts.append(_text(x0, y + 13, b.label, "block-label above"))
                row_free = x0 + text_w + 4
            parts.append("</g>")
        parts.append("</g>")
    axis_y = top + len(lanes) * BLOCK_LANE_H
    parts.append(f'<line x1="{label_w}" y1="{axis_y}" x2="{WIDTH - PAD}" y2="{axis_y}" class="axis" '
                 f'stroke="#9ca3af"/>')
    for t in _ticks(t_max):
        xx = x(t)
        anchor = "end" if xx > WIDTH - PAD - 16 else "middle"
        parts.append(f'<line x1="{xx:.1f}" y1="{axis_y}" x2="{xx:.1f}" y2="{axis_y + 4}" class="axis" '
                     f'stroke="#9ca3af"/>')
        parts.append(_text(xx, axis_y + 17, _fmt(t), "axis-label", anchor))
    parts.append(_text(label_w, axis_y + 34, unit, "axis-label unit"))
    parts.append("</svg>")
    return Markup("".join(parts))
