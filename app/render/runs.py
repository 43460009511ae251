"""Turning a measured run result (typed: app.verify.engine.result) into pictures and tables
for the result panel."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

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
from app.verify.engine.result import BucketRecord, PipelineBlock, RunResult

# A run's event list can be long; the timeline draws at most this many spans per rank.
MAX_SPANS_PER_LANE = 400


def _or(value: Any, default: float) -> float:
    return default if value is None else float(value)


def _t(event: dict[str, Any]) -> float:
    return float(event.get("t_ms", 0.0))


def snippet_start(result: RunResult) -> float:
    """When the first rank started the snippet (ms from run start): the timeline's zero."""
    starts = [_t(ev) for r in result.ranks for ev in r.events if ev.get("kind") == "snippet_start"]
    return min(starts) if starts else 0.0


# A collective a rank entered this much (ms) before the last of its peers is drawn as waiting
# for them up to then; less is the noise of two processes starting one call.
WAIT_MIN_MS = 2.0
_P2P = {"send": "recv", "isend": "irecv", "recv": "send", "irecv": "isend"}


def _call_key(rank: int, start: dict[str, Any], ordinal: dict[Any, int]) -> tuple[Any, ...] | None:
    """Which call of which peers this collective is: the same key on every participant."""
    op = str(start.get("op", ""))
    peer = start.get("peer")
    if op in _P2P:
        if not isinstance(peer, int):
            return None
        sender, receiver = (rank, peer) if op in ("send", "isend") else (peer, rank)
        base: tuple[Any, ...] = ("p2p", sender, receiver)
    elif op == "batch_isend_irecv" or op.startswith("bucket"):
        return None
    else:
        group = start.get("group_ranks")
        base = (op, tuple(group) if group else None)
    n = ordinal.get(base, 0)
    ordinal[base] = n + 1
    return (*base, n)


def peer_arrivals(result: RunResult) -> dict[tuple[int, Any], tuple[float, int]]:
    """For each rank's collective call (rank, seq): when the last of its participants entered
    the call, and which rank that was (a receive's participant is its sender)."""
    calls: dict[tuple[Any, ...], list[tuple[int, Any, float]]] = defaultdict(list)
    for r in result.ranks:
        ordinal: dict[Any, int] = {}
        for ev in r.events:
            if ev.get("kind") == "collective_start":
                key = _call_key(r.rank, ev, ordinal)
                if key is not None:
                    calls[key].append((r.rank, ev.get("seq"), _t(ev)))
    out: dict[tuple[int, Any], tuple[float, int]] = {}
    for entries in calls.values():
        if len(entries) < 2:
            continue
        last_rank, _seq, last = max(entries, key=lambda e: e[2])
        for rank, seq, _t0 in entries:
            out[(rank, seq)] = (last, last_rank)
    return out


def rank_lanes(result: RunResult) -> tuple[list[Lane], float]:
    """One lane per rank: DDP forward/backward, collectives (blocked ones to the kill), exits.

    Times are shifted so that 0 is the moment the first rank started the snippet.
    """
    t0 = snippet_start(result)
    t_end = float(result.timings.get("wall_ms") or 0.0)
    arrivals = peer_arrivals(result)
    lanes = []
    for r in result.ranks:
        lane = Lane(label=f"rank {r.rank}")
        open_coll: dict[Any, dict[str, Any]] = {}
        open_fwd: dict[Any, float] = {}
        last_fwd_end: dict[Any, float] = {}
        for ev in r.events:
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
                    began = _t(start)
                    last, peer = arrivals.get((r.rank, start.get("seq")), (began, r.rank))
                    if kind.startswith("collective") and last - began >= WAIT_MIN_MS and last < t:
                        lane.spans.append(Span(began, last, "waiting", "waiting",
                                               f"{label}: waited {last - began:.1f} ms for rank {peer} "
                                               f"to enter it ({began:.1f}–{last:.1f} ms)"))
                        began = last
                    lane.spans.append(Span(began, t, "collective", label,
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
        # Pipeline stage blocks are drawn in a picture of their own, in step order (below this
        # one), where every block is wide enough for its name.
        blocked = r.blocked_in
        if blocked is not None:
            since = blocked.since_ms
            label = blocked.op
            lane.spans.append(Span(since, max(t_end, since), "blocked", f"{label} (blocked)",
                                   f"blocked in {label} from {since:.1f} ms until the run was stopped"))
        lane.spans = [Span(max(0.0, sp.start - t0), max(0.0, sp.end - t0), sp.kind, sp.label, sp.title)
                      for sp in lane.spans[:MAX_SPANS_PER_LANE]]
        lane.marks = [Mark(max(0.0, m.t - t0), m.kind, m.label) for m in _end_marker(lane.marks)]
        lanes.append(lane)
    return lanes, max(0.0, t_end - t0)


def _end_marker(marks: list[Mark]) -> list[Mark]:
    """One end marker per rank, as the legend reads: ✕ if it raised, else ■ where it finished.

    A rank that raised also exits, and a finished snippet is followed by the process exit;
    drawing each would put two symbols on one lane.
    """
    errors = [m for m in marks if m.kind == "error"]
    if errors:
        return [errors[0]]
    exits = [m for m in marks if m.kind == "exit"]
    return [exits[0]] if exits else marks


_BLOCK_LETTER = {"forward": "F", "backward": "B", "backward_input": "I", "backward_weight": "W"}
_BLOCK_WORDS = {"forward": "forward", "backward": "backward", "backward_input": "backward (input gradients)",
                "backward_weight": "backward (weight gradients)"}


def _block_label(block: PipelineBlock, *, several: bool) -> str:
    """F3 for the forward of micro-batch 3 (s1F3 on a rank holding several stages)."""
    letter = f"{_BLOCK_LETTER[block.kind]}{block.microbatch}"
    return f"s{block.stage}{letter}" if several else letter


def _block_title(block: PipelineBlock, start: float, end: float | None) -> str:
    until = f"{end:.2f} ms" if end is not None else "(never finished)"
    failed = f"; failed: {block.error}" if block.error else ""
    return (f"stage {block.stage}, micro-batch {block.microbatch}: {_BLOCK_WORDS[block.kind]} "
            f"{start:.2f} ms – {until}{failed}")


def pipeline_picture(result: RunResult, svg_id: str = "run-pipeline") -> Markup | None:
    """The pipeline stages' blocks, one lane per rank, zoomed to the pipeline's span; None if none ran."""
    if not result.pipeline:
        return None
    t0 = min(b.start_ms for pl in result.pipeline for b in pl.blocks)
    t_end = max(max(b.end_ms if b.end_ms is not None else b.start_ms for b in pl.blocks)
                for pl in result.pipeline) - t0
    lanes = []
    described = []
    for pl in result.pipeline:
        several = len(pl.stages) > 1
        lane = BlockLane(label=f"rank {pl.rank}", note=f"idle {pl.bubble_fraction:.0%}")
        for b in pl.blocks:
            end = (b.end_ms if b.end_ms is not None else t0 + t_end) - t0
            lane.blocks.append(Block(b.start_ms - t0, end, b.kind, _block_label(b, several=several),
                                     _block_title(b, b.start_ms - t0, None if b.end_ms is None else end)))
        lanes.append(lane)
        order = " ".join(_block_label(b, several=several) for b in pl.blocks)
        stages = ", ".join(str(s) for s in pl.stages)
        described.append(f"rank {pl.rank} (stage {stages}): {order}; idle {pl.bubble_fraction:.0%} of "
                         f"its {pl.span_ms:.1f} ms span")
    desc = ("Pipeline stage blocks in the order they ran, F for forward and B for backward of a "
            "micro-batch: " + "; ".join(described) + ".")
    return pipeline_svg(lanes, t_end, title="Pipeline stages: forward (F) and backward (B) per micro-batch",
                        desc=desc, svg_id=svg_id, unit="ms")


def timeline_picture(result: RunResult, svg_id: str = "run-timeline") -> Markup:
    """The run's timeline: what each rank did, to scale (the pipeline's blocks are drawn in
    step order by pipeline_picture)."""
    lanes, t_end = rank_lanes(result)
    blocked = [f"rank {r.rank} blocked in {r.blocked_in.op}" for r in result.ranks if r.blocked_in]
    desc = (f"Measured timeline of {len(lanes)} ranks over {t_end:.0f} ms from the start of the "
            f"snippet; outcome "
            f"{result.outcome}." + (" " + "; ".join(blocked) + "." if blocked else ""))
    picture = timeline_svg(lanes, t_end, title="What each rank did, measured", desc=desc, svg_id=svg_id,
                           unit="ms (from snippet start)")
    return picture


@dataclass
class BucketView:
    rank: int
    iteration: int
    rows: list[BucketRow]
    compute_end: float
    records: list[BucketRecord]

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


# A run may reduce buckets in many iterations; the page offers this many to pick from.
MAX_BUCKET_ITERATIONS = 12


@dataclass
class BucketIterations:
    """The bucket charts grouped by iteration: the ones offered, and how many were measured."""

    shown: list[tuple[int, list[BucketView]]]
    total: int
    # Iterations the question's expectations ask about (shown first, open).
    asked: list[int]

    @property
    def partial(self) -> bool:
        return len(self.shown) < self.total


def asked_iterations(doc: Any) -> list[int]:
    """Iterations a question's bucket expectations name (bucket_count, bucket_order)."""
    verify = getattr(doc, "verify", None)
    found: set[int] = set()
    for e in (verify.expect if verify is not None else []):
        for check in (e.bucket_count, e.bucket_order):
            if check is not None and check.iteration is not None:
                found.add(check.iteration)
    return sorted(found)


def bucket_iterations(result: RunResult, doc: Any = None,
                      limit: int = MAX_BUCKET_ITERATIONS) -> BucketIterations:
    """Every measured iteration's bucket charts, grouped; the first `limit` iterations and any the
    question asks about are offered."""
    by_iteration: dict[int, list[BucketView]] = defaultdict(list)
    for view in bucket_views(result, max_views=None):
        by_iteration[view.iteration].append(view)
    asked = [i for i in asked_iterations(doc) if i in by_iteration]
    keep = sorted(set(sorted(by_iteration)[:limit]) | set(asked))
    return BucketIterations([(i, by_iteration[i]) for i in keep], len(by_iteration), asked)


def bucket_views(result: RunResult, *, max_views: int | None = 4) -> list[BucketView]:
    """Bucket charts per (rank, iteration), earliest first; times relative to the run start."""
    backward_end: dict[tuple[int, int], float] = {}
    forward_end: dict[tuple[int, int], float] = {}
    last_grad: dict[tuple[int, int], float] = {}
    for r in result.ranks:
        for ev in r.events:
            if ev.get("iteration") is None:
                continue
            key = (r.rank, int(ev["iteration"]))
            if ev.get("kind") == "grad_ready":
                # The last gradient computed ends backward compute; DDP's own
                # backward_end comes later, after it has waited for the buckets.
                last_grad[key] = max(last_grad.get(key, 0.0), _t(ev))
            elif ev.get("kind") == "ddp_backward_end":
                backward_end[key] = _t(ev)
            elif ev.get("kind") == "ddp_forward_end":
                forward_end[key] = _t(ev)
    groups: dict[tuple[int, int], list[BucketRecord]] = defaultdict(list)
    for b in result.buckets:
        groups[(b.rank, b.iteration)].append(b)
    views = []
    for (rank, iteration), recs in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        recs = sorted(recs, key=lambda b: b.reduce_start_ms)
        # Like the article's table: times from the start of this iteration's backward
        # (approximated by the end of its forward), not from the start of the run.
        t0 = forward_end.get((rank, iteration))
        if t0 is None:
            t0 = min((b.first_ready_ms or b.reduce_start_ms for b in recs), default=0.0)
        rows = []
        for b in recs:
            start = b.reduce_start_ms
            end = _or(b.reduce_end_ms, start)
            first = _or(b.first_ready_ms, start)
            last = _or(b.last_ready_ms, start)
            rows.append(BucketRow(f"bucket {b.index}", max(0.0, first - t0), max(0.0, last - t0),
                                  max(0.0, start - t0), max(0.0, end - t0)))
        end_abs = last_grad.get((rank, iteration), backward_end.get((rank, iteration)))
        compute_end = (max(0.0, end_abs - t0) if end_abs is not None
                       else max((r.last_ready for r in rows), default=0.0))
        views.append(BucketView(rank, iteration, rows, compute_end, recs))
    return views if max_views is None else views[:max_views]


def error_lines(result: RunResult) -> list[int]:
    """Snippet lines that raised or led to a blocked collective, for highlighting."""
    lines = set()
    for r in result.ranks:
        for item in (r.error, r.blocked_in):
            if item is not None and item.line:
                lines.add(item.line)
    return sorted(lines)


_WARNING = re.compile(r"\b[A-Z]\w*Warning: ")


def warning_count(text: str | None) -> int:
    """How many Python warnings (torch's UserWarning and the like) a rank's output holds."""
    return len(_WARNING.findall(text or ""))


def value_names(result: RunResult) -> list[str]:
    names: list[str] = []
    for r in result.ranks:
        for name in r.values:
            if name not in names:
                names.append(name)
    return names


@dataclass
class Change:
    what: str
    before: Any
    after: Any
    delta: str = ""
    # The knob's name, for a row that is a knob's value (the page shows the knob's label).
    knob: str = ""


# A measured number that moved by less than this share of itself reads "about the same".
SAME_SHARE = 0.005


def _num_delta(a: Any, b: Any) -> str:
    """How a number changed, in words: "unchanged", "about the same (+8)", "+2 (+50%)"."""
    if isinstance(a, bool) or isinstance(b, bool):
        return "" if a != b else "unchanged"
    if isinstance(a, int | float) and isinstance(b, int | float):
        d = b - a
        if d == 0:
            return "unchanged"
        if a and abs(d) < SAME_SHARE * abs(a):
            return f"about the same ({d:+.6g})"
        return f"{d:+.6g} ({d / a:+.0%})" if a else f"{d:+.6g}"
    return "" if a != b else "unchanged"


def knob_text(value: Any) -> str:
    """A knob's value as words, not JSON: strings bare, `op=reduce_scatter` for a mapping."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, dict):
        return ", ".join(f"{k}={knob_text(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(knob_text(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def compare(before: RunResult, after: RunResult) -> list[Change]:
    """What the run before and this run measured, in numbers: the knobs that differ, then every
    reported value per rank (one that did not change says so), outcome, buckets, bytes, time."""
    out: list[Change] = []
    # The world size is a knob of its own when the question offers it (named by its label).
    sized = "world_size" in before.params or "world_size" in after.params
    if before.world_size != after.world_size:
        out.append(Change("world size", before.world_size, after.world_size,
                          _num_delta(before.world_size, after.world_size),
                          knob="world_size" if sized else ""))
    for name in dict.fromkeys([*before.params, *after.params]):
        if name == "world_size" and before.world_size != after.world_size:
            continue  # said just above
        bv, av = before.params.get(name, "—"), after.params.get(name, "—")
        if bv != av:
            out.append(Change(name, bv, av, "changed", knob=name))
    if before.outcome != after.outcome:
        out.append(Change("outcome", before.outcome, after.outcome))
    b_ranks = {r.rank: r for r in before.ranks}
    a_ranks = {r.rank: r for r in after.ranks}
    for name in value_names(after) + [n for n in value_names(before) if n not in value_names(after)]:
        for rank in sorted(set(b_ranks) | set(a_ranks)):
            bv = b_ranks[rank].values.get(name, "—") if rank in b_ranks else "—"
            av = a_ranks[rank].values.get(name, "—") if rank in a_ranks else "—"
            if "—" in (bv, av) and bv == av:
                continue
            if "—" in (bv, av):
                # A rank only one of the runs had (another world size), or a value it alone reported.
                delta = "only in the run before" if av == "—" else "only in this run"
            else:
                delta = _num_delta(bv, av) or ("unchanged" if bv == av else "changed")
            out.append(Change(f"{name} on rank {rank}", bv, av, delta))
    nb, na = len(before.buckets), len(after.buckets)
    if nb != na:
        out.append(Change("bucket reductions (all ranks)", nb, na, _num_delta(nb, na)))
    for rank in sorted(set(b_ranks) & set(a_ranks)):
        bs, as_ = b_ranks[rank].bytes_sent, a_ranks[rank].bytes_sent
        if bs != as_:
            out.append(Change(f"bytes sent by rank {rank}", bs, as_, _num_delta(bs, as_)))
    bw, aw = before.timings.get("wall_ms"), after.timings.get("wall_ms")
    if bw is not None and aw is not None:
        b1, a1 = round(bw, 1), round(aw, 1)
        out.append(Change("wall time (ms)", b1, a1, _num_delta(b1, a1)))
    return out
