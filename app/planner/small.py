""""Measure it small": a learner's layout shrunk to at most four gloo ranks, run through the
verify queue with the planner's own trusted snippet (snippets/measure_small.py), and the
formulas' per-rank predictions set beside what the run measured.

Pure: `shrink` makes the small layout from a plan, `compare` reads a finished run's result.
What is measured, and how each number is read:

- parameter, gradient and optimizer bytes: the snippet sums the live tensors of its rank
  (local shards under ZeRO) between backward and the optimizer step;
- bytes on the wire: the engine's own counts of the second (measured) step, which the
  snippet brackets with barriers: the socket total it records at each collective's end for
  the whole step, and each data-parallel collective's bytes;
- the bubble and the micro-batches in flight: the engine's pipeline lanes, the blocks each
  stage ran in the measured step, replayed in their recorded order with unit durations (the
  schedule's bubble, what the formula describes) and read off the wall clock (shown, not
  compared: on CPU a tiny block's compute is shorter than the messages around it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from app.planner import formulas as f
from app.planner.schemas import PlanIn
from app.verify.engine.result import PipelineBlock, RankResult, RunResult

SNIPPET_PATH = Path(__file__).with_name("snippets") / "measure_small.py"
# gloo ranks on one machine: four is the most a learner's click should start.
MAX_RANKS = 4
# Two steps of a 4-rank run take about a second on one core; the rest is headroom for a
# busy machine and a cold worker.
TIMEOUT_S = 60
# The tiny model: blocks h -> 4h -> h. The hidden size is odd on purpose, so that FSDP2's
# padding shows; the sizes keep every message at or above 32 KB, so the few hundred bytes
# gloo adds to each collective stay under 2 %.
HIDDEN = 63
ROWS = 4
SEQ = 64
BLOCKS_PER_CHUNK = 2
# Micro-batches per step in the small run: enough for 1F1B's steady state on two stages.
MAX_MICRO_BATCHES = 4
# Which barriers (of the snippet's own, in order) bracket the measured step: each of the two
# steps runs between a pair, and the second pair is the measured step.
MEASURED_STEP_BARRIERS = (2, 3)

# Model state: the formula leaves out the bias kept whole on every tensor rank (h values per
# block) and FSDP2's padding of each tensor's first dimension to a multiple of dp; in this
# model both stay under 1 %.
STATE_TOLERANCE = 0.02
# Bytes on the wire: gloo frames each message with a few dozen bytes, and the step's closing
# barrier adds a few hundred.
WIRE_TOLERANCE = 0.03
# The schedule's bubble is exact arithmetic on the recorded order: only rounding separates it
# from the formula.
BUBBLE_TOLERANCE = 0.005


def snippet_text() -> str:
    """The trusted snippet every small run executes (its text is part of the run's cache key)."""
    return _snippet()


@lru_cache(maxsize=1)
def _snippet() -> str:
    return SNIPPET_PATH.read_text()


@dataclass(frozen=True)
class SmallLayout:
    """The degrees and sizes of one small run: what the snippet's `params` hold."""

    dp: int
    tp: int
    pp: int
    zero: int
    m: int
    v: int
    hidden: int = HIDDEN
    rows: int = ROWS
    seq: int = SEQ
    blocks: int = 0
    # How this differs from the learner's layout, in words (not part of the run).
    notes: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        if self.blocks == 0:
            object.__setattr__(self, "blocks", BLOCKS_PER_CHUNK * self.pp * self.v)

    @property
    def world_size(self) -> int:
        return self.dp * self.tp * self.pp

    def params(self) -> dict[str, int]:
        """The snippet's params (and so part of the run's cache key)."""
        return {"dp": self.dp, "tp": self.tp, "pp": self.pp, "zero": self.zero, "m": self.m,
                "v": self.v, "hidden": self.hidden, "blocks": self.blocks, "rows": self.rows,
                "seq": self.seq}

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> SmallLayout:
        """The layout a stored run's params describe (ValueError if they describe none)."""
        keys = ("dp", "tp", "pp", "zero", "m", "v", "hidden", "blocks", "rows", "seq")
        values = {k: params.get(k) for k in keys}
        if not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= 4096
                   for x in values.values()):
            raise ValueError("not a small layout")
        layout = cls(**values)  # type: ignore[arg-type]
        if layout.world_size > MAX_RANKS or min(layout.dp, layout.tp, layout.pp, layout.m) < 1:
            raise ValueError("not a small layout")
        return layout

    @property
    def block_params(self) -> int:
        """Parameters of one whole block: w1 (4h × h) and its bias, w2 (h × 4h), b2 (h)."""
        h = self.hidden
        return 4 * h * h + 4 * h + 4 * h * h + h

    @property
    def model_params(self) -> int:
        return self.blocks * self.block_params

    def coords(self, rank: int) -> tuple[int, int, int]:
        """(pp_rank, dp_rank, tp_rank) of a rank: tensor fastest, then data, then pipeline."""
        return rank // (self.dp * self.tp), rank // self.tp % self.dp, rank % self.tp

    def rank_of(self, pp_rank: int, dp_rank: int, tp_rank: int) -> int:
        return (pp_rank * self.dp + dp_rank) * self.tp + tp_rank

    def dp_group(self, rank: int) -> list[int]:
        p, _, t = self.coords(rank)
        return [self.rank_of(p, d, t) for d in range(self.dp)]

    def describe(self) -> str:
        parts = [f"dp {self.dp}", f"tp {self.tp}", f"pp {self.pp}"]
        if self.v > 1:
            parts.append(f"{self.v} chunks per pipeline rank")
        return (f"{' × '.join(parts[:3])}{', ' + parts[3] if len(parts) > 3 else ''}, ZeRO-{self.zero}, "
                f"{self.m} micro-batch{'es' if self.m > 1 else ''} of {self.rows} × {self.seq} tokens, "
                f"{self.blocks} MLP blocks of hidden size {self.hidden} "
                f"({self.model_params:,} parameters) on {self.world_size} gloo ranks")


def shrink(plan: PlanIn) -> SmallLayout:
    """The learner's layout on at most four ranks: each degree above 1 becomes 2 (tensor
    parallelism is dropped when all three are used), the same ZeRO stage, two chunks per
    pipeline rank when interleaved, and a few micro-batches."""
    lay = plan.layout
    notes: list[str] = []
    dp, tp, pp = (2 if lay.dp > 1 else 1), (2 if lay.tp > 1 else 1), (2 if lay.pp > 1 else 1)
    if dp * tp * pp > MAX_RANKS:
        tp = 1
        notes.append("Your layout uses all three degrees; eight ranks is more than a small run "
                     "takes, so this one keeps data and pipeline parallelism and drops tensor "
                     "parallelism (set pp 1 to measure dp × tp).")
    if (lay.dp, lay.tp, lay.pp) != (dp, tp if tp > 1 or lay.tp == 1 else lay.tp, pp):
        notes.append(f"Degrees of {lay.dp}, {lay.tp}, {lay.pp} become {dp}, {tp}, {pp}: the same "
                     "kinds of parallelism, two ranks each.")
    zero = lay.zero_stage
    if zero > 0 and dp == 1:
        notes.append("ZeRO shards over the data-parallel group, which has one rank here: "
                     "it shards nothing.")
    v = 2 if lay.interleave > 1 and pp > 1 else 1
    if lay.interleave > 2 and pp > 1:
        notes.append(f"Interleaving with {lay.interleave} chunks per GPU becomes 2.")
    m_full = lay.global_batch // (lay.dp * lay.micro_batch)
    m = max(min(m_full, MAX_MICRO_BATCHES), pp)
    if v > 1:
        m = MAX_MICRO_BATCHES  # torch's interleaved schedule runs whole rounds of pp
    if m != m_full:
        notes.append(f"{m_full} micro-batches per step become {m}.")
    if lay.sequence_parallel or lay.recompute != "none":
        notes.append("Sequence parallelism and recomputation change activations, which the "
                     "small run does not measure.")
    return SmallLayout(dp=dp, tp=tp, pp=pp, zero=zero if dp > 1 else 0, m=m, v=v, notes=tuple(notes))


# ---------------------------------------------------------------- predictions

@dataclass(frozen=True)
class Prediction:
    """The planner's formulas for the small layout, per rank."""

    param_bytes: float
    grad_bytes: float
    optimizer_bytes: float
    dp_bytes: float
    tp_bytes: float
    pp_bytes: float
    bubble: float
    in_flight: float

    @property
    def wire_bytes(self) -> float:
        return self.dp_bytes + self.tp_bytes + self.pp_bytes


def predict(layout: SmallLayout) -> Prediction:
    """What app.planner.formulas say each rank of the small run holds and sends per step."""
    shard = {"tp": layout.tp, "pp": layout.pp, "dp": layout.dp, "zero_stage": layout.zero}
    p = layout.model_params
    tokens = {"seq_len": layout.seq, "micro_batch": layout.rows, "hidden": layout.hidden}
    # The small model's blocks are MLPs alone: one all-reduce forward, one backward (a whole
    # transformer layer has two of each).
    tp_bytes = (f.tp_bytes_per_layer(**tokens, tp=layout.tp, collectives=2)
                * layout.blocks / layout.pp * layout.m)
    return Prediction(
        param_bytes=f.param_bytes(p, **shard), grad_bytes=f.grad_bytes(p, **shard),
        optimizer_bytes=f.optimizer_bytes(p, **shard),
        dp_bytes=f.dp_bytes_per_step(p, **shard), tp_bytes=tp_bytes,
        pp_bytes=(f.pp_bytes_per_step(**tokens, pp=layout.pp, micro_batches=layout.m,
                                      interleave=layout.v) if layout.pp > 1 else 0.0),
        bubble=f.bubble_fraction(pp=layout.pp, micro_batches=layout.m, interleave=layout.v),
        in_flight=f.micro_batches_in_flight(pp=layout.pp, micro_batches=layout.m))


# ---------------------------------------------------------------- reading the run

@dataclass(frozen=True)
class StepWindow:
    """The measured step on one rank: between two of the snippet's barriers."""

    start_ms: float
    end_ms: float
    start_seq: int
    end_seq: int
    sent: int  # bytes this rank put on the wire in the step (the engine's socket totals)


def step_window(rank: RankResult) -> StepWindow | None:
    """The measured step of one rank, or None if the rank never reached its end."""
    starts = {e["seq"]: e for e in rank.events if e.get("kind") == "collective_start"}
    barriers = [(starts[e["seq"]], e) for e in rank.events
                if e.get("kind") == "collective_end" and e.get("op") == "barrier"
                and starts.get(e["seq"], {}).get("source") == "snippet"]
    first, last = MEASURED_STEP_BARRIERS
    if len(barriers) <= last:
        return None
    (_, open_end), (close_start, close_end) = barriers[first], barriers[last]
    sent = (int(close_end.get("sent_total", 0)) - int(close_end.get("bytes_sent", 0))
            - int(open_end.get("sent_total", 0)))
    return StepWindow(start_ms=float(open_end["t_ms"]), end_ms=float(close_start["t_ms"]),
                      start_seq=int(open_end["seq"]), end_seq=int(close_start["seq"]), sent=sent)


@dataclass(frozen=True)
class DpTraffic:
    measured: int      # what the rank sent in its data-parallel collectives (engine's counts)
    ring: float        # the same calls at the ring formula's volume (what NCCL would send)
    gloo: float        # the same calls at the volume gloo's algorithms send
    calls: dict[str, int]


def dp_traffic(rank: RankResult, window: StepWindow, group: list[int]) -> DpTraffic:
    """The data-parallel collectives of the measured step: measured, and the ring formula
    applied to each call torch actually issued (its payload and group size)."""
    ends = {e["seq"]: e for e in rank.events if e.get("kind") == "collective_end"}
    measured, ring, gloo = 0, 0.0, 0.0
    calls: dict[str, int] = {}
    for e in rank.events:
        # The default group's events name no ranks: it is every rank.
        ranks_of = e.get("group_ranks") or list(range(int(e.get("group_size") or 0)))
        if (e.get("kind") != "collective_start" or not window.start_seq < e["seq"] < window.end_seq
                or e.get("op") == "barrier" or ranks_of != group):
            continue
        n, size, op = int(e.get("group_size") or 1), float(e.get("bytes") or 0), str(e.get("op"))
        calls[op] = calls.get(op, 0) + 1
        measured += int(ends.get(e["seq"], {}).get("bytes_sent", 0))
        if op == "all_reduce":
            ring += f.ring_all_reduce_bytes(size, ranks=n)
            gloo += f.ring_all_reduce_bytes(size, ranks=n)
        elif op in ("all_gather_into_tensor", "all_gather"):
            # The payload is this rank's shard; the gathered result is n of them.
            ring += f.all_gather_bytes(size * n, ranks=n)
            gloo += f.all_gather_bytes(size * n, ranks=n)
        elif op in ("reduce_scatter_tensor", "reduce_scatter"):
            ring += f.reduce_scatter_bytes(size, ranks=n)
            # gloo has no reduce-scatter of its own: it all-reduces the whole input and keeps
            # the rank's part (measured: 2 MiB sent for a 2 MiB input on two ranks).
            gloo += f.ring_all_reduce_bytes(size, ranks=n)
    return DpTraffic(measured=measured, ring=ring, gloo=gloo, calls=calls)


def _step_blocks(lane_blocks: list[PipelineBlock], window: StepWindow) -> list[PipelineBlock]:
    return [b for b in lane_blocks if window.start_ms <= b.start_ms <= window.end_ms]


def schedule_bubble(lanes: dict[int, list[PipelineBlock]], *, forward: float = 1.0,
                    backward: float = 2.0) -> float | None:
    """The bubble of the order the stages ran their blocks in, with every chunk's forward
    taking `forward` and its backward `backward`: each lane runs its blocks in the recorded
    order, a forward waits for the previous chunk's forward of that micro-batch, a backward
    for the next chunk's backward. 1 − busy / span over the whole pipeline, averaged over the
    lanes; None if the order cannot run (a block waits on one that never comes)."""
    if not lanes:
        return None
    last_stage = max(b.stage for blocks in lanes.values() for b in blocks)
    done: dict[tuple[str, int, int], float] = {}
    position = {rank: 0 for rank in lanes}
    free = {rank: 0.0 for rank in lanes}
    busy = {rank: 0.0 for rank in lanes}
    first_start: float | None = None
    progressed = True
    while progressed:
        progressed = False
        for rank, blocks in lanes.items():
            while position[rank] < len(blocks):
                b = blocks[position[rank]]
                kind = "F" if b.kind == "forward" else "B"
                if kind == "F":
                    dep = ("F", b.stage - 1, b.microbatch) if b.stage > 0 else None
                elif b.stage < last_stage:
                    dep = ("B", b.stage + 1, b.microbatch)
                else:
                    dep = ("F", b.stage, b.microbatch)
                if dep is not None and dep not in done:
                    break
                start = max(free[rank], done[dep] if dep is not None else 0.0)
                length = forward if kind == "F" else backward
                done[(kind, b.stage, b.microbatch)] = free[rank] = start + length
                busy[rank] += length
                first_start = start if first_start is None else min(first_start, start)
                position[rank] += 1
                progressed = True
    if any(position[r] < len(blocks) for r, blocks in lanes.items()):
        return None
    span = max(free.values()) - (first_start or 0.0)
    return sum(1 - busy[r] / span for r in lanes) / len(lanes) if span > 0 else 0.0


def timed_bubble(lanes: dict[int, list[PipelineBlock]]) -> float | None:
    """The idle share of the pipeline's span on the wall clock, averaged over its lanes."""
    spans = [(b.start_ms, b.end_ms) for blocks in lanes.values() for b in blocks if b.end_ms is not None]
    if not spans:
        return None
    span = max(e for _, e in spans) - min(s for s, _ in spans)
    if span <= 0:
        return None
    shares = []
    for blocks in lanes.values():
        busy = sum((b.end_ms - b.start_ms) for b in blocks if b.end_ms is not None)
        shares.append(1 - busy / span)
    return sum(shares) / len(shares)


def peak_in_flight(blocks: list[PipelineBlock], *, chunks_per_rank: int) -> float:
    """The most micro-batches whose activations a lane held at once, in units of a whole
    stage's micro-batch: forwards not yet matched by their backward, over the chunks."""
    held = peak = 0
    for b in blocks:
        held += 1 if b.kind == "forward" else -1
        peak = max(peak, held)
    return peak / chunks_per_rank


# ---------------------------------------------------------------- the comparison

@dataclass(frozen=True)
class Row:
    """One quantity: the formula's prediction, what gloo sends for the calls torch made (for
    bytes on the wire), what was measured, and whether they agree within `tolerance`."""

    key: str
    quantity: str
    unit: str
    predicted: float
    measured: float | None
    agrees: bool
    tolerance: str
    why: str
    expected_here: float | None = None
    explained: bool = True


@dataclass(frozen=True)
class Comparison:
    ok: bool
    problem: str | None
    rows: tuple[Row, ...]
    timed_bubble: float | None = None

    def row(self, key: str) -> Row:
        return next(r for r in self.rows if r.key == key)


def _tensor_shapes(layout: SmallLayout) -> list[tuple[int, ...]]:
    """The shapes of one rank's tensors (tensor-parallel local), one block after another."""
    h, ffn = layout.hidden, 4 * layout.hidden // layout.tp
    return [(ffn, h), (ffn,), (h, ffn), (h,)] * (layout.blocks // layout.pp)


def exact_state(layout: SmallLayout, rank: int = 0) -> dict[str, int]:
    """What rank `rank` of the small model holds, to the byte: its tensor-parallel shards, the
    biases kept whole, ZeRO's sharding with its padding (FSDP2 splits each tensor's first
    dimension like torch.chunk; the hand-made ZeRO-1/2 pads one flat buffer)."""
    shapes = _tensor_shapes(layout)
    numel = sum(math.prod(s) for s in shapes)
    replicated = layout.hidden * (layout.blocks // layout.pp) if layout.tp > 1 else 0
    dp_rank = layout.coords(rank)[1]
    padding = 0
    if layout.zero == 3:
        local = 0
        for s in shapes:
            chunk = math.ceil(s[0] / layout.dp)
            rows = max(0, min(chunk, s[0] - dp_rank * chunk))
            local += rows * math.prod(s[1:])
            padding += chunk * layout.dp - s[0]
        params = grads = optim = local
    elif layout.zero in (1, 2):
        shard = math.ceil(numel / layout.dp)
        padding = shard * layout.dp - numel
        params, grads, optim = numel, (shard if layout.zero == 2 else numel), shard
    else:
        params = grads = optim = numel
    return {"param_bytes": f.PARAM_BYTES * params, "grad_bytes": f.GRAD_BYTES * grads,
            # Adam's step count is a 4-byte tensor beside the moments.
            "optimizer_bytes": f.OPTIMIZER_BYTES * optim + 4,
            "replicated": replicated, "padding": padding}


def _close(measured: float, predicted: float, tol: float) -> bool:
    if predicted == 0:
        return abs(measured) <= 1024  # a barrier's handshake, no payload
    return abs(measured - predicted) <= tol * abs(predicted)


def _spread(values: list[float]) -> float:
    """The value the table shows for all ranks: the one farthest from the rest's mean."""
    mean = sum(values) / len(values)
    return max(values, key=lambda x: abs(x - mean))


def compare(layout: SmallLayout, result: RunResult) -> Comparison:
    """The small run's prediction beside its measurement, quantity by quantity."""
    if result.outcome != "ok":
        return Comparison(ok=False, problem=result.diagnosis, rows=())
    pred = predict(layout)
    windows = {r.rank: step_window(r) for r in result.ranks}
    if any(w is None for w in windows.values()) or len(windows) != layout.world_size:
        return Comparison(ok=False, problem="The run ended before its measured step did.", rows=())
    ranks = sorted(result.ranks, key=lambda r: r.rank)
    rows: list[Row] = []

    exact = exact_state(layout)
    for key, name in (("param_bytes", "Parameter bytes per rank"),
                      ("grad_bytes", "Gradient bytes per rank"),
                      ("optimizer_bytes", "Optimizer bytes per rank")):
        # Ranks can differ (FSDP2's last shard of an odd dimension is a row short): the
        # fullest rank is the one that must fit, and every rank must match its own exact count.
        measured = max(float(r.values.get(key, 0)) for r in ranks)
        predicted = float(getattr(pred, key))
        here = float(max(exact_state(layout, r.rank)[key] for r in ranks))
        exact_everywhere = all(float(r.values.get(key, -1)) == exact_state(layout, r.rank)[key]
                               for r in ranks)
        why = []
        if exact["replicated"] and not (key == "grad_bytes" and layout.zero >= 2) and not (
                key == "optimizer_bytes" and layout.zero >= 1) and layout.zero != 3:
            why.append(f"each tensor rank also holds each block's bias b2 ({layout.hidden} values) "
                       f"whole, {exact['replicated']:,} values that the formula splits tp ways")
        elif exact["replicated"]:
            why.append(f"the {exact['replicated']:,} values of the biases b2 that every tensor rank "
                       "holds whole are sharded with the rest, a little more than the formula's "
                       "share")
        if exact["padding"]:
            why.append(f"{exact['padding']:,} values of padding, to divide the shards evenly by dp")
        if key == "optimizer_bytes":
            why.append("Adam's step counter is one more 4-byte tensor")
        agrees = _close(measured, predicted, STATE_TOLERANCE)
        rows.append(Row(key=key, quantity=name, unit="B", predicted=predicted, measured=measured,
                        expected_here=here, explained=exact_everywhere,
                        agrees=agrees, tolerance=f"±{STATE_TOLERANCE:.0%}",
                        why=("Agrees" if agrees else "Differs") + (
                            ": " + "; ".join(why) + "." if why else ": nothing left out.")))

    traffic = [dp_traffic(r, windows[r.rank], layout.dp_group(r.rank)) for r in ranks]  # type: ignore[arg-type]
    dp_measured = _spread([float(t.measured) for t in traffic])
    dp_gloo = _spread([t.gloo for t in traffic])
    dp_ring = _spread([t.ring for t in traffic])
    calls = traffic[0].calls
    explained = _close(dp_measured, dp_gloo, WIRE_TOLERANCE)
    agrees = _close(dp_measured, pred.dp_bytes, WIRE_TOLERANCE)
    reasons = []
    if layout.dp == 1:
        reasons.append("one data-parallel rank: nothing to synchronise")
    if not _close(dp_ring, pred.dp_bytes, WIRE_TOLERANCE):
        issued = ", ".join(f"{n} × {op}" for op, n in sorted(calls.items()))
        reasons.append(f"torch issued {issued} in the step: at the ring formula's volume that is "
                       f"{dp_ring:,.0f} B, where the planner counts one gathering of the "
                       "parameters each way per step" + (
                           " (FSDP2 gathers them again for each micro-batch)" if layout.zero == 3 else ""))
    if not _close(dp_gloo, dp_ring, WIRE_TOLERANCE):
        reasons.append("gloo has no reduce-scatter algorithm of its own: it all-reduces the whole "
                       "buffer and keeps its part, sending twice the ring's volume "
                       f"({dp_gloo:,.0f} B for these calls)")
    rows.append(Row(
        key="dp_bytes", quantity="Data-parallel bytes sent per step per rank", unit="B",
        predicted=pred.dp_bytes, measured=dp_measured, expected_here=dp_gloo, agrees=agrees,
        explained=explained, tolerance=f"±{WIRE_TOLERANCE:.0%}",
        why=("Agrees: a ring all-reduce of the bf16 gradients, as gloo runs it."
             if agrees and not reasons else
             ("Differs: " if not agrees else "Agrees; ") + "; ".join(reasons) + "."
             + ("" if explained else " The measurement is not explained by these calls either."))))

    wire_measured = _spread([float(windows[r.rank].sent) for r in ranks])  # type: ignore[union-attr]
    wire_expected = dp_gloo + pred.tp_bytes + pred.pp_bytes
    wire_agrees = _close(wire_measured, pred.wire_bytes, WIRE_TOLERANCE)
    parts = [f"data-parallel {pred.dp_bytes:,.0f}"]
    if layout.tp > 1:
        parts.append(f"tensor-parallel all-reduces {pred.tp_bytes:,.0f}")
    if layout.pp > 1:
        parts.append(f"pipeline sends {pred.pp_bytes:,.0f}")
    rows.append(Row(
        key="wire_bytes", quantity="All bytes sent per step per rank", unit="B",
        predicted=pred.wire_bytes, measured=wire_measured, expected_here=wire_expected,
        agrees=wire_agrees, explained=_close(wire_measured, wire_expected, WIRE_TOLERANCE),
        tolerance=f"±{WIRE_TOLERANCE:.0%}",
        why=("Agrees" if wire_agrees else "Differs, as the data-parallel row does")
        + f": the formulas' {' + '.join(parts)} B, plus gloo's framing."))

    if layout.pp > 1:
        rows.extend(_pipeline_rows(layout, result, windows, pred))  # type: ignore[arg-type]
    timed = None
    if layout.pp > 1:
        timed = timed_bubble(_pipeline_lanes(layout, result, windows))  # type: ignore[arg-type]
    return Comparison(ok=True, problem=None, rows=tuple(rows), timed_bubble=timed)


def _pipeline_lanes(layout: SmallLayout, result: RunResult,
                    windows: dict[int, StepWindow]) -> dict[int, list[PipelineBlock]]:
    """The measured step's blocks of the first pipeline (dp rank 0, tp rank 0), by rank."""
    ranks = {layout.rank_of(p, 0, 0) for p in range(layout.pp)}
    return {lane.rank: _step_blocks(lane.blocks, windows[lane.rank])
            for lane in result.pipeline if lane.rank in ranks}


def _pipeline_rows(layout: SmallLayout, result: RunResult, windows: dict[int, StepWindow],
                   pred: Prediction) -> list[Row]:
    lanes = _pipeline_lanes(layout, result, windows)
    bubble = schedule_bubble(lanes)
    rows = [Row(
        key="bubble", quantity="Pipeline bubble (the schedule's order)", unit="share",
        predicted=pred.bubble, measured=bubble,
        agrees=bubble is not None and abs(bubble - pred.bubble) <= BUBBLE_TOLERANCE,
        tolerance=f"±{BUBBLE_TOLERANCE}",
        why=("The stages' blocks, replayed in the order torch's "
             + ("interleaved " if layout.v > 1 else "") + "1F1B schedule ran them (a backward "
             "twice a forward), leave this share idle: the formula's fill and drain. The wall "
             "clock below differs: on CPU the messages take longer than a tiny block's compute."))]
    first = lanes.get(layout.rank_of(0, 0, 0), [])
    held = peak_in_flight(first, chunks_per_rank=layout.v)
    rows.append(Row(
        key="in_flight", quantity="Micro-batches in flight on the first stage", unit="",
        predicted=pred.in_flight, measured=held, agrees=math.isclose(held, pred.in_flight),
        tolerance="exact",
        why=("Agrees: 1F1B starts a backward as soon as the pipeline is full, so the first stage "
             "never holds more than pp micro-batches." if math.isclose(held, pred.in_flight) else
             "Differs: the interleaved schedule runs more forwards of its smaller chunks before "
             "the first backward, holding more activations than plain 1F1B's pp micro-batches "
             "(counted here in whole-stage micro-batches).")))
    return rows
