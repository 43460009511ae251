"""Turning a measured run result (its JSON form) into pictures and tables for the result panel."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from app.render.svg import BucketRow, Lane, Mark, Span, bucket_svg, timeline_svg

# A run's event list can be long; the timeline draws at most this many spans per rank.
MAX_SPANS_PER_LANE = 400


def _or(value: Any, default: float) -> float:
    return default if value is None else float(value)


def _t(event: dict[str, Any]) -> float:
    return float(event.get("t_ms", 0.0))


def snippet_start(result: dict[str, Any]) -> float:
    """When the first rank started the snippet (ms from run start): the timeline's zero."""
    starts = [_t(ev) for r in result.get("ranks") or [] for ev in r.get("events") or []
              if ev.get("kind") == "snippet_start"]
    return min(starts) if starts else 0.0


def rank_lanes(result: dict[str, Any]) -> tuple[list[Lane], float]:
    """One lane per rank: DDP forward/backward, collectives (blocked ones to the kill), exits.

    Times are shifted so that 0 is the moment the first rank started the snippet.
    """
    t0 = snippet_start(result)
    t_end = float((result.get("timings") or {}).get("wall_ms") or 0.0)
    lanes = []
    for r in result.get("ranks") or []:
        lane = Lane(label=f"rank {r.get('rank')}")
        open_coll: dict[Any, dict[str, Any]] = {}
        open_fwd: dict[Any, float] = {}
        last_fwd_end: dict[Any, float] = {}
        for ev in r.get("events") or []:
            kind = ev.get("kind")
            t = _t(ev)
            t_end = max(t_end, t)
            key = (ev.get("ddp", 0), ev.get("iteration"))
            if kind in ("collective_start", "bucket_reduce_start"):
                open_coll[(kind.split("_")[0], ev.get("seq"))] = ev
            elif kind in ("collective_end", "bucket_reduce_end"):
                start = open_coll.pop((kind.split("_")[0], ev.get("seq")), None)
                if start is not None:
                    label = (f"bucket {start.get('index')}" if kind.startswith("bucket")
                             else str(start.get("op", "")))
                    detail = ", ".join(
                        f"{k}={start[k]}" for k in ("shape", "bytes", "iteration") if start.get(k) is not None
                    )
                    lane.spans.append(Span(_t(start), t, "collective", label,
                                           f"{label} {_t(start):.1f}–{t:.1f} ms ({detail})"))
            elif kind == "ddp_forward_start":
                open_fwd[key] = t
            elif kind == "ddp_forward_end":
                start_t = open_fwd.pop(key, None)
                if start_t is not None:
                    lane.spans.append(Span(start_t, t, "forward", "fwd",
                                           f"forward, iteration {ev.get('iteration')}"))
                last_fwd_end[key] = t
            elif kind == "ddp_backward_end":
                start_t = last_fwd_end.pop(key, None)
                if start_t is not None:
                    lane.spans.append(Span(start_t, t, "backward", "bwd",
                                           f"loss and backward, iteration {ev.get('iteration')}"))
            elif kind == "exception":
                lane.marks.append(Mark(t, "error", f"{ev.get('type')}: {ev.get('message', '')}"[:300]))
            elif kind in ("exit", "snippet_end"):
                lane.marks.append(Mark(t, "exit", "snippet finished" if kind == "snippet_end"
                                       else f"exited with {ev.get('exit_code')}"))
        blocked = r.get("blocked_in")
        if blocked:
            since = float(blocked.get("since_ms") or 0.0)
            label = str(blocked.get("op"))
            lane.spans.append(Span(since, max(t_end, since), "blocked", f"{label} (blocked)",
                                   f"blocked in {label} from {since:.1f} ms until the run was stopped"))
        lane.spans = [Span(max(0.0, sp.start - t0), max(0.0, sp.end - t0), sp.kind, sp.label, sp.title)
                      for sp in lane.spans[:MAX_SPANS_PER_LANE]]
        lane.marks = [Mark(max(0.0, m.t - t0), m.kind, m.label) for m in lane.marks]
        lanes.append(lane)
    return lanes, max(0.0, t_end - t0)


def timeline_picture(result: dict[str, Any], svg_id: str = "run-timeline") -> Markup:
    lanes, t_end = rank_lanes(result)
    blocked = [f"rank {r.get('rank')} blocked in {r['blocked_in']['op']}"
               for r in result.get("ranks") or [] if r.get("blocked_in")]
    desc = (f"Measured timeline of {len(lanes)} ranks over {t_end:.0f} ms from the start of the "
            f"snippet; outcome "
            f"{result.get('outcome')}." + (" " + "; ".join(blocked) + "." if blocked else ""))
    return timeline_svg(lanes, t_end, title="What each rank did, measured", desc=desc, svg_id=svg_id,
                        unit="ms (from snippet start)")


@dataclass
class BucketView:
    rank: int
    iteration: int
    rows: list[BucketRow]
    compute_end: float
    records: list[dict[str, Any]]

    @property
    def exposed_ms(self) -> float:
        return sum(r.exposed(self.compute_end) for r in self.rows)

    def picture(self, svg_id: str) -> Markup:
        desc = "; ".join(
            f"{r.label}: gradients ready {r.first_ready:.2f}–{r.last_ready:.2f} ms, reduced "
            f"{r.reduce_start:.2f}–{r.reduce_end:.2f} ms, {r.exposed(self.compute_end):.2f} ms exposed"
            for r in self.rows
        ) + f". Backward compute ended at {self.compute_end:.2f} ms."
        return bucket_svg(self.rows, self.compute_end, svg_id=svg_id, desc=desc,
                          unit="ms (from backward)",
                          title=f"Gradient buckets on rank {self.rank}, iteration {self.iteration}")


def bucket_views(result: dict[str, Any], *, max_views: int = 4) -> list[BucketView]:
    """Bucket charts per (rank, iteration), earliest first; times relative to the run start."""
    backward_end: dict[tuple[int, int], float] = {}
    forward_end: dict[tuple[int, int], float] = {}
    last_grad: dict[tuple[int, int], float] = {}
    for r in result.get("ranks") or []:
        for ev in r.get("events") or []:
            if ev.get("iteration") is None:
                continue
            key = (int(r.get("rank", 0)), int(ev["iteration"]))
            if ev.get("kind") == "grad_ready":
                # The last gradient computed ends backward compute; DDP's own
                # backward_end comes later, after it has waited for the buckets.
                last_grad[key] = max(last_grad.get(key, 0.0), _t(ev))
            elif ev.get("kind") == "ddp_backward_end":
                backward_end[key] = _t(ev)
            elif ev.get("kind") == "ddp_forward_end":
                forward_end[key] = _t(ev)
    groups: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for b in result.get("buckets") or []:
        groups[(int(b.get("rank", 0)), int(b.get("iteration", 0)))].append(b)
    views = []
    for (rank, iteration), recs in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        recs = sorted(recs, key=lambda b: b.get("reduce_start_ms") or 0.0)
        # Like the article's table: times from the start of this iteration's backward
        # (approximated by the end of its forward), not from the start of the run.
        t0 = forward_end.get((rank, iteration))
        if t0 is None:
            t0 = min((float(b.get("first_ready_ms") or b.get("reduce_start_ms") or 0.0) for b in recs),
                     default=0.0)
        rows = []
        for b in recs:
            start = float(b.get("reduce_start_ms") or 0.0)
            end = _or(b.get("reduce_end_ms"), start)
            first = _or(b.get("first_ready_ms"), start)
            last = _or(b.get("last_ready_ms"), start)
            rows.append(BucketRow(f"bucket {b.get('index')}", max(0.0, first - t0), max(0.0, last - t0),
                                  max(0.0, start - t0), max(0.0, end - t0)))
        end_abs = last_grad.get((rank, iteration), backward_end.get((rank, iteration)))
        compute_end = (max(0.0, end_abs - t0) if end_abs is not None
                       else max((r.last_ready for r in rows), default=0.0))
        views.append(BucketView(rank, iteration, rows, compute_end, recs))
    return views[:max_views]


def error_lines(result: dict[str, Any]) -> list[int]:
    """Snippet lines that raised or led to a blocked collective, for highlighting."""
    lines = set()
    for r in result.get("ranks") or []:
        for item in (r.get("error"), r.get("blocked_in")):
            if item and item.get("line"):
                lines.add(int(item["line"]))
    return sorted(lines)


def value_names(result: dict[str, Any]) -> list[str]:
    names: list[str] = []
    for r in result.get("ranks") or []:
        for name in (r.get("values") or {}):
            if name not in names:
                names.append(name)
    return names


@dataclass
class Change:
    what: str
    before: Any
    after: Any
    delta: str = ""


def _num_delta(a: Any, b: Any) -> str:
    if isinstance(a, bool) or isinstance(b, bool):
        return ""
    if isinstance(a, int | float) and isinstance(b, int | float):
        d = b - a
        ratio = f", ×{b / a:.3g}" if a not in (0, 0.0) else ""
        return f"{d:+.6g}{ratio}"
    return ""


def compare(before: dict[str, Any], after: dict[str, Any]) -> list[Change]:
    """What differs between two results, in numbers: values per rank, outcome, buckets, bytes, time."""
    out: list[Change] = []
    if before.get("params") != after.get("params"):
        out.append(Change("knobs", before.get("params"), after.get("params")))
    if before.get("world_size") != after.get("world_size"):
        out.append(Change("world size", before.get("world_size"), after.get("world_size"),
                          _num_delta(before.get("world_size"), after.get("world_size"))))
    if before.get("outcome") != after.get("outcome"):
        out.append(Change("outcome", before.get("outcome"), after.get("outcome")))
    b_ranks = {r.get("rank"): r for r in before.get("ranks") or []}
    a_ranks = {r.get("rank"): r for r in after.get("ranks") or []}
    for name in value_names(after) + [n for n in value_names(before) if n not in value_names(after)]:
        for rank in sorted(set(b_ranks) | set(a_ranks), key=lambda x: (x is None, x)):
            bv = (b_ranks.get(rank) or {}).get("values", {}).get(name, "—")
            av = (a_ranks.get(rank) or {}).get("values", {}).get(name, "—")
            if bv != av:
                out.append(Change(f"{name} on rank {rank}", bv, av, _num_delta(bv, av)))
    nb, na = len(before.get("buckets") or []), len(after.get("buckets") or [])
    if nb != na:
        out.append(Change("bucket reductions (all ranks)", nb, na, _num_delta(nb, na)))
    for rank in sorted(set(b_ranks) & set(a_ranks), key=lambda x: (x is None, x)):
        bs, as_ = b_ranks[rank].get("bytes_sent", 0), a_ranks[rank].get("bytes_sent", 0)
        if bs != as_:
            out.append(Change(f"bytes sent by rank {rank}", bs, as_, _num_delta(bs, as_)))
    bw = (before.get("timings") or {}).get("wall_ms")
    aw = (after.get("timings") or {}).get("wall_ms")
    if bw is not None and aw is not None:
        b1, a1 = round(bw, 1), round(aw, 1)
        out.append(Change("wall time (ms)", b1, a1, _num_delta(b1, a1)))
    return out
