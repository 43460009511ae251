"""Server-rendered SVG for the /plan page: one stacked bar (memory per GPU by component against
the GPU's memory; a step's seconds by where they go).

Like charts.py: plain data in, markup with <title> and <desc> out, drawn 320 units wide so
that 12-unit text stays 12 CSS px or more on a phone; the page puts a table of the same
numbers beside the bar.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from markupsafe import Markup

W = 320
PAD = 8
BAR_Y = 22
BAR_H = 26
LEGEND_ROW = 18
# One colour per component, in the order the bar stacks them (colour-blind-safe, Okabe-Ito).
COLOURS = ("#0072b2", "#56b4e9", "#009e73", "#e69f00", "#cc79a7", "#d55e00")


@dataclass(frozen=True)
class Segment:
    label: str
    value: float
    text: str  # the value as the legend prints it ("12.3 GB")


def stacked_bar(segments: list[Segment], *, title: str, desc: str, svg_id: str,
                capacity: float | None = None, capacity_text: str = "", total_text: str = "") -> Markup:
    """One horizontal bar stacked from `segments`, with a legend row per segment; with a
    `capacity`, a line where it ends and the part of the bar beyond it hatched."""
    total = sum(max(s.value, 0.0) for s in segments)
    scale_to = max(total, capacity or 0.0) * 1.04 or 1.0
    inner = W - 2 * PAD
    # Below the bar: the capacity's label (when there is one), then a row per segment.
    legend_top = BAR_Y + BAR_H + (44 if capacity is not None else 20)
    height = legend_top + LEGEND_ROW * len(segments) + 6
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {height}" class="chart plan-bar" '
        f'role="img" aria-labelledby="{svg_id}-t {svg_id}-d" id="{svg_id}" data-total="{total:.6g}">',
        f'<title id="{svg_id}-t">{escape(title)}</title>',
        f'<desc id="{svg_id}-d">{escape(desc)}</desc>',
        f'<defs><pattern id="{svg_id}-over" width="6" height="6" patternUnits="userSpaceOnUse" '
        f'patternTransform="rotate(45)"><rect width="3" height="6" fill="#b91c1c" opacity="0.55"/>'
        f'</pattern></defs>',
        f'<text x="{PAD}" y="14" class="bar-label">{escape(total_text)}</text>',
        f'<rect x="{PAD}" y="{BAR_Y}" width="{inner}" height="{BAR_H}" fill="#eef0f4" class="bar-track"/>',
    ]
    x = float(PAD)
    for i, seg in enumerate(segments):
        width = inner * max(seg.value, 0.0) / scale_to
        colour = COLOURS[i % len(COLOURS)]
        parts.append(f'<rect x="{x:.2f}" y="{BAR_Y}" width="{width:.2f}" height="{BAR_H}" '
                     f'fill="{colour}" class="segment" data-key="{escape(seg.label)}" '
                     f'data-value="{seg.value:.6g}"><title>{escape(seg.label)}: {escape(seg.text)}'
                     f'</title></rect>')
        x += width
    if capacity is not None:
        cx = PAD + inner * capacity / scale_to
        if total > capacity:
            parts.append(f'<rect x="{cx:.2f}" y="{BAR_Y}" width="{x - cx:.2f}" height="{BAR_H}" '
                         f'fill="url(#{svg_id}-over)" class="overflow"/>')
        parts.append(f'<line x1="{cx:.2f}" y1="{BAR_Y - 4}" x2="{cx:.2f}" y2="{BAR_Y + BAR_H + 4}" '
                     f'stroke="#1d2330" stroke-width="2" class="capacity"/>')
        anchor = "end" if cx > W / 2 else "start"
        parts.append(f'<text x="{cx:.2f}" y="{BAR_Y + BAR_H + 20}" text-anchor="{anchor}" '
                     f'class="tick">{escape(capacity_text)}</text>')
    for i, seg in enumerate(segments):
        y = legend_top + i * LEGEND_ROW
        colour = COLOURS[i % len(COLOURS)]
        parts.append(f'<rect x="{PAD}" y="{y - 10}" width="12" height="12" fill="{colour}"/>')
        parts.append(f'<text x="{PAD + 18}" y="{y}" class="bar-label">{escape(seg.label)}</text>')
        parts.append(f'<text x="{W - PAD}" y="{y}" text-anchor="end" class="bar-value">'
                     f'{escape(seg.text)}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))
