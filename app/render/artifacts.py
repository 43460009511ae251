"""Artifacts a snippet produced (a profiler trace, flight-recorder dumps, a memory account) as
server-side SVG, for a question's stored trace and a run's result alike.

The profile and the dumps are lanes of spans drawn by svg.timeline_svg, the memory account
bars in the dashboard charts' style (320 units wide, so it needs no sideways scroll on a
phone). Nothing is highlighted: which span, entry or row matters is the question.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from html import escape

from markupsafe import Markup

from app.render.svg import FONT_PX, Lane, Span, timeline_svg
from app.verify.engine.artifacts import (
    FlightRecorderArtifact,
    MemoryArtifact,
    ProfileArtifact,
    ProfileSpan,
    RankArtifact,
)

# A profile's spans map onto the timeline's kinds (and so its colours): annotations of
# DDP, FSDP and the snippet are the grey "user" boxes.
_SPAN_KIND = {"forward": "forward", "backward": "backward", "collective": "collective",
              "fsdp": "user", "ddp": "user", "annotation": "user"}
# Labels of the categories, for legends and tables.
CATEGORY_WORDS = {"forward": "forward op", "backward": "backward node", "collective": "gloo collective",
                  "fsdp": "FSDP step", "ddp": "DDP", "annotation": "annotation"}


def profile_rows(artifact: ProfileArtifact) -> list[tuple[str, list[ProfileSpan]]]:
    """The profile's spans as rows that never overlap: each thread's spans, nested ones (an
    FSDP step inside another, a linear layer inside DDP's forward) on rows of their own."""
    rows: list[tuple[str, list[ProfileSpan]]] = []
    for lane, name in enumerate(artifact.lanes):
        mine: list[list[ProfileSpan]] = []
        for s in sorted((s for s in artifact.spans if s.lane == lane), key=lambda s: (s.start_ms, -s.end_ms)):
            row = next((r for r in mine if r[-1].end_ms <= s.start_ms), None)
            if row is None:
                mine.append([s])
            else:
                row.append(s)
        for i, spans in enumerate(mine):
            rows.append((name if i == 0 else f"{name} ·{i + 1}", spans))
    return rows


def _short(name: str) -> str:
    return name.removeprefix("gloo:").removeprefix("aten::").removeprefix("FSDP::")


def profile_picture(artifact: ProfileArtifact, *, title: str, svg_id: str) -> Markup:
    """One lane per row of profile_rows, times in ms from the first span kept."""
    lanes = []
    for label, spans in profile_rows(artifact):
        lanes.append(Lane(label=label, spans=[
            Span(s.start_ms, s.end_ms, _SPAN_KIND[s.category], _short(s.name),
                 f"{s.name} ({CATEGORY_WORDS[s.category]}) {s.start_ms:.2f}–{s.end_ms:.2f} ms")
            for s in spans]))
    t_end = max((s.end_ms for s in artifact.spans), default=1.0)
    counts = Counter(CATEGORY_WORDS[s.category] for s in artifact.spans)
    desc = (f"A torch.profiler trace on {len(artifact.lanes)} threads "
            f"({', '.join(artifact.lanes)}) over {t_end:.1f} ms: "
            + ", ".join(f"{n} {what}{'' if n == 1 else 's'}" for what, n in sorted(counts.items()))
            + ". The table below lists every span with its times.")
    return timeline_svg(lanes, t_end, title=title, desc=desc, svg_id=svg_id,
                        unit="ms (from the first span)")


def flight_picture(ranks: list[tuple[int, FlightRecorderArtifact]], *, title: str, svg_id: str) -> Markup:
    """One lane per rank, one box per recorded collective at its sequence number."""
    seqs = sorted({e.collective_seq for _, a in ranks for e in a.entries if e.collective_seq})
    if not seqs:
        seqs = [0]
    lo, hi = seqs[0], seqs[-1]
    lanes = []
    described = []
    for rank, a in ranks:
        lane = Lane(label=f"rank {rank}")
        for e in a.entries:
            if not e.collective_seq:
                continue
            at = e.collective_seq - lo
            lane.spans.append(Span(at + 0.06, at + 0.94, "collective", _short(e.op),
                                   f"rank {rank}, #{e.collective_seq} {e.op} on group {e.group}, "
                                   f"sizes {e.input_sizes}, {e.state}"))
        lanes.append(lane)
        last = max((e.collective_seq for e in a.entries), default=0)
        described.append(f"rank {rank}: {len(a.entries)} entries, the newest #{last}")
    desc = ("Each rank's flight recorder, one box per collective at its sequence number: "
            + "; ".join(described) + ". The table below lists every entry.")
    return timeline_svg(lanes, float(hi - lo + 1), title=title, desc=desc, svg_id=svg_id,
                        unit="collective sequence number",
                        axis_labels=[(s - lo + 0.5, f"#{s}") for s in seqs])


W = 320
PAD = 8
ROW_H = 34
BAR_H = 12


def bytes_size(n: int) -> str:
    """Bytes as a reader compares them: MiB (2**20) from 64 KiB up, KiB below, bytes under 1 KiB."""
    if n >= 2**16:
        return f"{n / 2**20:.2f} MiB"
    return f"{n / 2**10:.1f} KiB" if n >= 2**10 else f"{n} B"


_mb = bytes_size


@dataclass(frozen=True)
class MemoryGroup:
    category: str
    new_bytes: int
    rows: int


def memory_groups(artifact: MemoryArtifact) -> list[MemoryGroup]:
    order: dict[str, list[int]] = {}
    for r in artifact.rows:
        order.setdefault(r.category, []).append(r.new_bytes)
    return [MemoryGroup(c, sum(v), len(v)) for c, v in order.items()]


def memory_picture(artifact: MemoryArtifact, *, title: str, svg_id: str) -> Markup:
    """A bar per row, grouped by category in the order the snippet wrote them, each as long as
    the memory it adds; a row that adds nothing (it shares storage) is an empty outline."""
    rows = artifact.rows
    most = max((r.new_bytes for r in rows), default=0) or 1
    inner = W - 2 * PAD
    height = PAD * 2 + len(rows) * ROW_H + 14 * len(memory_groups(artifact))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {height:.0f}" class="chart memory" '
        f'role="img" aria-labelledby="{svg_id}-t {svg_id}-d" id="{svg_id}">',
        f'<title id="{svg_id}-t">{escape(title)}</title>',
        f'<desc id="{svg_id}-d">{escape(_memory_desc(artifact))}</desc>',
    ]
    y = PAD
    category = None
    for r in rows:
        if r.category != category:
            category = r.category
            parts.append(f'<text x="{PAD}" y="{y + 10}" class="bar-label group" font-weight="600" '
                         f'style="font-size:{FONT_PX}px">{escape(category)}</text>')
            y += 14
        label = f"{r.name}: {_mb(r.new_bytes)}" + ("" if r.new_bytes == r.bytes else f" of {_mb(r.bytes)}")
        parts.append(f'<g class="bar memory-row"><title>{escape(r.name)} {r.shape} {escape(r.dtype)}: '
                     f'{r.bytes} bytes, adds {r.new_bytes}{(" — " + escape(r.note)) if r.note else ""}'
                     '</title>')
        parts.append(f'<text x="{PAD}" y="{y + 11}" class="bar-label" style="font-size:{FONT_PX}px">'
                     f'{escape(label)}</text>')
        w = min(inner, inner * r.new_bytes / most)
        if r.new_bytes:
            parts.append(f'<rect x="{PAD}" y="{y + 15}" width="{max(w, 1.5):.1f}" height="{BAR_H}" rx="2" '
                         f'class="bar-fill" fill="#3b6fd8"/>')
        else:
            outline = min(inner, inner * r.bytes / most) if r.bytes else 2
            parts.append(f'<rect x="{PAD}" y="{y + 15}" width="{outline:.1f}" '
                         f'height="{BAR_H}" rx="2" class="bar-shared" fill="none" stroke="#9ca3af" '
                         'stroke-dasharray="3 2"/>')
        parts.append("</g>")
        y += ROW_H
    parts.append("</svg>")
    return Markup("".join(parts))


def _memory_desc(artifact: MemoryArtifact) -> str:
    groups = "; ".join(f"{g.category}: {g.rows} tensor{'' if g.rows == 1 else 's'}, {_mb(g.new_bytes)}"
                       for g in memory_groups(artifact))
    when = f" {artifact.moment}" if artifact.moment else ""
    return (f"Memory held{when}, by category: {groups}; {_mb(artifact.total())} in all. "
            "The table below lists every tensor.")


def artifact_picture(ranks: list[RankArtifact], *, title: str, svg_id: str) -> Markup:
    """The picture of one named artifact: the dumps of all ranks side by side; a profile or a
    memory account of each rank on its own."""
    if not ranks:
        return Markup("")
    first = ranks[0].artifact
    if isinstance(first, FlightRecorderArtifact):
        dumps = [(r.rank, r.artifact) for r in ranks if isinstance(r.artifact, FlightRecorderArtifact)]
        return flight_picture(dumps, title=title, svg_id=svg_id)
    out = []
    for r in ranks:
        heading = f"{title} (rank {r.rank})" if len(ranks) > 1 else title
        a = r.artifact
        if isinstance(a, ProfileArtifact):
            out.append(profile_picture(a, title=heading, svg_id=f"{svg_id}-{r.rank}"))
        elif isinstance(a, MemoryArtifact):
            out.append(memory_picture(a, title=heading, svg_id=f"{svg_id}-{r.rank}"))
    return Markup("".join(out))


def run_artifacts(result: object) -> dict[str, list[RankArtifact]]:
    """A run result's artifacts by name, each with the ranks that made it."""
    found: dict[str, list[RankArtifact]] = {}
    for r in getattr(result, "ranks", []):
        for name, a in r.artifacts.items():
            found.setdefault(name, []).append(RankArtifact(rank=r.rank, artifact=a))
    return found


def flight_sequences(ranks: list[RankArtifact]) -> list[int]:
    """Every collective sequence number any rank's dump holds, in order: the table's rows."""
    return sorted({e.collective_seq for r in ranks if isinstance(r.artifact, FlightRecorderArtifact)
                   for e in r.artifact.entries})


def flight_groups(ranks: list[RankArtifact]) -> list[str]:
    """The process groups the dumps' entries belong to, in the order first seen."""
    seen: dict[str, None] = {}
    for r in ranks:
        if isinstance(r.artifact, FlightRecorderArtifact):
            for e in r.artifact.entries:
                seen.setdefault(e.group)
    return list(seen)
