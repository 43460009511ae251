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
    "waiting": "#fca5a5",
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


# Kinds drawn as a thin box inside the lane (over the forward and backward boxes).
INNER_KINDS = ("collective", "blocked", "waiting")
# A lane whose ops are too narrow to name inside their boxes names them on a row above.
OPS_ROW_H = 16


def _op_names_above(spans: list[Span], x: Callable[[float], float],
                    width: Callable[[Span], float]) -> list[tuple[float, str, str]]:
    """(x, text, title) of the names written above a lane's op boxes too narrow to hold them.

    Neighbouring boxes of one op share one name ("all_gather ×4"); a name goes where the row
    above is free, so names never overlap; the boxes' own <title>s keep every detail.
    """
    runs: list[list[Span]] = []
    for sp in sorted((sp for sp in spans if sp.kind in ("collective", "blocked") and sp.label),
                     key=lambda sp: sp.start):
        if _span_lines(sp, width(sp)):
            continue  # named inside its own box
        if runs and runs[-1][-1].label == sp.label:
            runs[-1].append(sp)
        else:
            runs.append([sp])
    out: list[tuple[float, str, str]] = []
    free = float(LABEL_W)
    for run in runs:
        text = run[0].label if len(run) == 1 else f"{run[0].label} ×{len(run)}"
        text_w = len(text) * CHAR_W
        x0 = max(x(run[0].start), free)
        if x0 + text_w > WIDTH - PAD:
            x0 = WIDTH - PAD - text_w
        if x0 < free or x0 > x(run[-1].end) + 40:
            continue  # no room near its boxes: the boxes' titles name it
        out.append((x0, text, f"{text}: {len(run)} call{'' if len(run) == 1 else 's'}"))
        free = x0 + text_w + CHAR_W
    return out


def timeline_svg(lanes: list[Lane], t_end: float, *, title: str, desc: str, unit: str = "ms",
                 svg_id: str = "timeline", axis_labels: list[tuple[float, str]] | None = None) -> Markup:
    """One lane per rank: spans as boxes labelled with their op; exits and errors as marks.

    Labels are never shortened: an op too narrow for its name is named on a row above the
    lane (neighbouring calls of one op once, with their count), and failing room there is
    left to the box's <title>; a stored trace's step text wraps, and its lane grows to hold it.
    A collective that waited for a peer to enter it is drawn blocked (waiting) up to then.
    """
    t_max = max(t_end, 1e-3)
    scale = (WIDTH - LABEL_W - PAD) / t_max

    def x(t: float) -> float:
        return LABEL_W + max(0.0, min(t, t_max)) * scale

    def width(s: Span) -> float:
        return max(x(s.end) - x(s.start), 1.5)

    wrapped = [{id(s): _span_lines(s, width(s)) for s in lane.spans} for lane in lanes]
    above = [_op_names_above(lane.spans, x, width) for lane in lanes]
    rows = [OPS_ROW_H if names else 0 for names in above]
    heights = [rows[i] + max(LANE_H, 16 + LINE_H * max((len(v) for v in lines.values()), default=0))
               for i, lines in enumerate(wrapped)]
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
        top, row = tops[i], rows[i]
        y, lane_h = top + row, heights[i] - row
        parts.append(f'<g class="lane" data-lane="{i}">')
        # A lane's name longer than its column ("Stage 0 (rank 0)") takes two lines, not the
        # boxes' room.
        names = _wrap(lane.label, LABEL_W, 2) if len(lane.label) * CHAR_W > LABEL_W - 6 else []
        if len(names) == 2:
            parts.append(f'<text x="4" y="{y + lane_h / 2 - 3}" class="lane-label" {_font()}>'
                         f'<tspan x="4">{escape(names[0])}</tspan>'
                         f'<tspan x="4" dy="{LINE_H}">{escape(names[1])}</tspan></text>')
        else:
            parts.append(f'<text x="4" y="{y + lane_h / 2 + 4}" class="lane-label" {_font()}>'
                         f'{escape(lane.label)}</text>')
        parts.append(f'<line x1="{LABEL_W}" y1="{y + lane_h - 2}" x2="{WIDTH - PAD}" '
                     f'y2="{y + lane_h - 2}" class="lane-line"/>')
        for xx, text, tip in above[i]:
            parts.append(f'<g class="op-name"><title>{escape(tip)}</title><text x="{xx:.1f}" y="{top + 13}" '
                         f'class="op-label" {_font()}>{escape(text)}</text></g>')
        for s in sorted(lane.spans, key=lambda s: (s.kind in INNER_KINDS, s.kind == "waiting", s.start)):
            x0, w = x(s.start), width(s)
            inner = s.kind in INNER_KINDS
            yy, hh = (y + lane_h / 2 - 7, 14) if inner else (y + 4, lane_h - 10)
            fill = COLOURS.get(s.kind, "#ddd")
            cls = f"span {s.kind}"
            stroke = {"blocked": ' stroke="#b91c1c" stroke-width="2"',
                      "waiting": ' stroke="#b91c1c" stroke-width="1.5" stroke-dasharray="3 2"',
                      }.get(s.kind, "")
            parts.append(
                f'<g class="{cls}"><title>{escape(s.title or s.label)}</title>'
                f'<rect x="{x0:.1f}" y="{yy}" width="{w:.1f}" height="{hh}" rx="2" fill="{fill}"{stroke}/>'
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
# A block is as wide as the longest name plus this much; a stretch where every lane idled for
# at least IDLE_SHARE of the picture's span is drawn IDLE_W wide and marked ≈.
BLOCK_PAD = 12
IDLE_W = 16
IDLE_SHARE = 0.08
# Ends closer than this (ms) are one moment.
EPS_MS = 1e-6


def _text(x: float, y: float, text: str, cls: str, anchor: str = "start") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" class="{cls}" text-anchor="{anchor}" {_font()}>'
            f'{escape(text)}</text>')


def step_columns(lanes: list[BlockLane]) -> dict[int, int]:
    """Each block's column (by id) when the lanes are drawn in step order.

    Blocks take their lane's next column, and never a column left of a block on another lane
    that had already ended when they started: a lane's order is exact, and a block is never
    drawn before something it came after. Overlapping work shares columns.
    """
    placed: list[tuple[int, Block, int]] = []
    cols: dict[int, int] = {}
    nxt = [0] * len(lanes)
    for lane_no, b in sorted(((i, b) for i, lane in enumerate(lanes) for b in lane.blocks),
                             key=lambda ib: (ib[1].start, ib[0])):
        c = nxt[lane_no]
        for other, o, oc in placed:
            if other != lane_no and o.end <= b.start + EPS_MS:
                c = max(c, oc)
        cols[id(b)] = c
        nxt[lane_no] = c + 1
        placed.append((lane_no, b, c))
    return cols


def pipeline_svg(lanes: list[BlockLane], t_end: float, *, title: str, desc: str, unit: str = "ms",
                 svg_id: str = "pipeline") -> Markup:
    """One lane per rank of pipeline stage blocks (forward, backward), labelled by micro-batch,
    laid out in step order (step_columns).

    Time is not to scale: every column is wide enough for the longest label, so every F and B is
    named whole; a lane's empty columns between its first and last block are its idle time,
    shaded; a stretch where every lane idled long is drawn as a narrow band marked ≈. Each
    block's <title> gives its real start and end. The picture is as wide as it needs (its width
    attribute), never squeezed below its text size.
    """
    label_w = LABEL_W + 10
    cols = step_columns(lanes)
    ncols = max(cols.values(), default=-1) + 1
    blocks = [b for lane in lanes for b in lane.blocks]
    slot = max((len(b.label) * CHAR_W + BLOCK_PAD for b in blocks), default=CHAR_W * 2 + BLOCK_PAD)
    by_col: dict[int, list[Block]] = {}
    for b in blocks:
        by_col.setdefault(cols[id(b)], []).append(b)
    span = max((b.end for b in blocks), default=0.0) - min((b.start for b in blocks), default=0.0)
    # Where each column starts, with a narrow ≈ band before a column that came after a long
    # stretch in which no lane ran anything.
    xs: list[float] = []
    gaps: list[tuple[float, float]] = []  # (x, idle ms)
    x = float(label_w)
    for c in range(ncols):
        if c:
            idle = min(b.start for b in by_col.get(c, [])) - max(b.end for b in by_col.get(c - 1, []))
            if span > 0 and idle >= IDLE_SHARE * span:
                gaps.append((x, idle))
                x += IDLE_W
        xs.append(x)
        x += slot
    axis_note = f"{unit}, in step order"
    width = max(x + PAD, label_w + len(axis_note) * CHAR_W + PAD)
    top = PAD
    lanes_h = len(lanes) * BLOCK_LANE_H
    height = top + lanes_h + AXIS_H + PAD
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height}" '
        f'width="{width:.0f}" height="{height}" '
        f'class="timeline pipeline natural" role="img" aria-labelledby="{svg_id}-t {svg_id}-d" '
        f'id="{svg_id}">',
        f'<title id="{svg_id}-t">{escape(title)}</title>',
        f'<desc id="{svg_id}-d">{escape(desc)}</desc>',
    ]
    for gx, idle in gaps:
        parts.append(f'<g class="idle-gap"><title>every stage idle for {_fmt(idle)} '
                     f'{escape(unit.split()[0])} (drawn compressed)</title>'
                     f'<rect x="{gx:.1f}" y="{top}" width="{IDLE_W}" height="{lanes_h}" fill="#f3f4f6"/>'
                     + _text(gx + IDLE_W / 2, top + lanes_h / 2 + 4, "≈", "gap-mark", "middle") + "</g>")
    for i, lane in enumerate(lanes):
        y = top + i * BLOCK_LANE_H
        box_y, box_h = y + 6, BLOCK_LANE_H - 14
        parts.append(f'<g class="lane" data-lane="{i}">')
        parts.append(_text(4, y + 20, lane.label, "lane-label"))
        if lane.note:
            parts.append(_text(4, y + 36, lane.note, "lane-note"))
        parts.append(f'<line x1="{label_w}" y1="{y + BLOCK_LANE_H - 2}" x2="{width - PAD:.1f}" '
                     f'y2="{y + BLOCK_LANE_H - 2}" class="lane-line"/>')
        mine = sorted(lane.blocks, key=lambda b: b.start)
        used = {cols[id(b)] for b in mine}
        if mine:
            # The lane's idle columns between its first and its last block: its bubble.
            for c in range(cols[id(mine[0])], cols[id(mine[-1])]):
                if c not in used:
                    parts.append(f'<rect x="{xs[c] + 2:.1f}" y="{box_y + box_h / 2 - 2}" '
                                 f'width="{slot - 4:.1f}" height="4" class="lane-idle" fill="#d1d5db">'
                                 '<title>idle</title></rect>')
        for b in mine:
            x0 = xs[cols[id(b)]] + 1
            w = slot - 2
            fill = COLOURS.get(b.kind, COLOURS["backward"])
            parts.append(f'<g class="block {b.kind}"><title>{escape(b.title)}</title>'
                         f'<rect x="{x0:.1f}" y="{box_y}" width="{w:.1f}" height="{box_h}" '
                         f'rx="2" fill="{fill}" stroke="#475569" stroke-width="0.5"/>')
            parts.append(_text(x0 + w / 2, box_y + box_h / 2 + 4, b.label, "block-label", "middle"))
            parts.append("</g>")
        parts.append("</g>")
    axis_y = top + lanes_h
    parts.append(f'<line x1="{label_w}" y1="{axis_y}" x2="{width - PAD:.1f}" y2="{axis_y}" class="axis" '
                 f'stroke="#9ca3af"/>')
    # Not a time axis (the picture is in step order): the real first and last moments only.
    parts.append(_text(label_w, axis_y + 17, "0", "axis-label"))
    parts.append(_text(width - PAD, axis_y + 17, _fmt(t_end), "axis-label", "end"))
    parts.append(_text(label_w, axis_y + 34, axis_note, "axis-label unit"))
    parts.append("</svg>")
    return Markup("".join(parts))
