"""Artifacts: evidence a snippet produces with torch's own tools, carried in the run result.

A snippet calls `artifact(name, kind, source)` (docs/question-format.md, "The snippet
contract"). The harness turns `source` into one of the shapes below inside the rank and
sends it as an `artifact` event; the runner checks it against the same model (it trusts
nothing a rank sends) and stores it under the rank's `artifacts`. A question can keep a
copy as its trace (`trace: {kind: artifact}`), drawn by the same code as the run's.

- `profile`: a `torch.profiler.profile` that has finished. Kept: the spans a reader of a
  training step needs (forward and backward ops, DDP's forward, FSDP's annotations,
  gloo's collectives on their worker threads, the snippet's own `record_function`s),
  times in ms from the first kept span, one lane per thread.
- `flight_recorder`: the dict `pickle.loads(torch._C._distributed_c10d._dump_fr_trace(
  True, True, False))` returns (the backend-neutral flight recorder, which gloo feeds when
  TORCH_FR_BUFFER_SIZE is set before the group is made). Kept per entry: group, sequence
  numbers, op, state, sizes and the snippet lines of its stack.
- `memory`: rows the snippet wrote itself (with saved-tensor hooks, parameters,
  gradients and optimizer state), each with its category and the bytes it adds.

Pure Python: nothing here imports torch, so the engine's process and the app read the
models without it; the converters take torch's objects by duck typing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

# What one artifact may hold: enough for a step of a small model, little enough that the
# run result stays small (an event is capped at 1 MiB like a reported value).
MAX_SPANS = 1500
MAX_ENTRIES = 512
MAX_ROWS = 400
MAX_NAME = 160
# The snippet's file as tracebacks and stacks name it (probes.SNIPPET_FILE).
SNIPPET_FILE = "snippet.py"

Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME)]
Ms = Annotated[float, Field(ge=0, le=1e9)]
SpanCategory = Literal["forward", "backward", "collective", "fsdp", "ddp", "annotation"]
ArtifactKind = Literal["profile", "flight_recorder", "memory"]
ARTIFACT_KINDS: tuple[str, ...] = ("profile", "flight_recorder", "memory")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class ProfileSpan(_Model):
    lane: int = Field(ge=0)
    name: Name
    category: SpanCategory
    start_ms: Ms
    end_ms: Ms


class ProfileArtifact(_Model):
    """A torch.profiler trace of one step, reduced to the spans worth reading."""

    kind: Literal["profile"]
    # One name per thread: "main" (the snippet's thread, where forward and backward run),
    # "gloo 1", "gloo 2" (gloo's worker threads), "thread N" for any other.
    lanes: list[Name] = Field(min_length=1, max_length=32)
    spans: list[ProfileSpan] = Field(max_length=MAX_SPANS)
    # Spans the profiler recorded beyond MAX_SPANS, left out.
    dropped: int = Field(default=0, ge=0)

    def signature(self) -> list[Any]:
        """What does not change from run to run: on the main thread the order of its spans
        (forward, backward, FSDP and DDP steps), on gloo's threads how many of each
        collective ran (which worker thread takes which is up to gloo)."""
        main = [s.name for s in sorted(self.spans, key=lambda s: (s.start_ms, -s.end_ms))
                if self.lanes[s.lane] == "main" and s.category != "annotation"]
        comm: dict[str, int] = {}
        for s in self.spans:
            if s.category == "collective":
                comm[s.name] = comm.get(s.name, 0) + 1
        return [main, sorted(comm.items())]


class FrameRef(_Model):
    line: int = Field(ge=0)
    function: Name


class FlightEntry(_Model):
    group: Name
    # Numbered per group: collectives and point-to-point operations each count from 1.
    collective_seq: int = Field(ge=0)
    p2p_seq: int = Field(ge=0)
    op: Name
    state: Name
    input_sizes: list[list[int]] = Field(default_factory=list, max_length=64)
    output_sizes: list[list[int]] = Field(default_factory=list, max_length=64)
    dtype: str = Field(default="", max_length=MAX_NAME)
    # ms after the recorder's first entry on this rank.
    created_ms: Ms = 0.0
    # The snippet's own lines in the stack that issued it, innermost first.
    frames: list[FrameRef] = Field(default_factory=list, max_length=16)


class FlightRecorderArtifact(_Model):
    """One rank's flight-recorder dump: the collectives it issued, in order."""

    kind: Literal["flight_recorder"]
    entries: list[FlightEntry] = Field(max_length=MAX_ENTRIES)

    def signature(self) -> list[Any]:
        return [[e.group, e.collective_seq, e.p2p_seq, e.op, e.state, e.input_sizes,
                 [f.line for f in e.frames]] for e in self.entries]


MemoryCategory = Literal["parameter", "gradient", "optimizer state", "saved for backward",
                         "activation", "other"]


class MemoryRow(_Model):
    category: MemoryCategory
    name: Name
    shape: list[int] = Field(default_factory=list, max_length=16)
    dtype: str = Field(default="", max_length=40)
    bytes: int = Field(ge=0)
    # What this tensor adds to memory: 0 when it shares storage with one counted already
    # (autograd saving a parameter keeps a reference, not a copy).
    new_bytes: int = Field(ge=0)
    note: str = Field(default="", max_length=MAX_NAME)


class MemoryArtifact(_Model):
    """Who holds which tensors at one moment of a step, and what each adds."""

    kind: Literal["memory"]
    moment: str = Field(default="", max_length=MAX_NAME)
    rows: list[MemoryRow] = Field(max_length=MAX_ROWS)

    def total(self, category: str | None = None) -> int:
        return sum(r.new_bytes for r in self.rows if category is None or r.category == category)

    def signature(self) -> list[Any]:
        return [[r.category, r.name, r.shape, r.dtype, r.bytes, r.new_bytes] for r in self.rows]


Artifact = Annotated[ProfileArtifact | FlightRecorderArtifact | MemoryArtifact,
                     Field(discriminator="kind")]


class RankArtifact(_Model):
    """One rank's artifact, as a question's trace keeps it."""

    rank: int = Field(ge=0)
    artifact: Artifact


def _name(text: Any) -> str:
    text = " ".join(str(text).split()) or "?"
    return text if len(text) <= MAX_NAME else text[: MAX_NAME - 1] + "…"


# --- profile -----------------------------------------------------------------------------

_BACKWARD_PREFIX = "autograd::engine::evaluate_function: "
# Autograd's bookkeeping nodes: one per parameter, nothing a reader of the step looks for.
_SKIP_BACKWARD = ("torch::autograd::AccumulateGrad",)
# aten ops that allocate, view or copy rather than compute: at the top of a stack they are
# framework bookkeeping (DDP's reducer writing buckets back, the loss's seed gradient).
_BOOKKEEPING = frozenset({
    "aten::empty", "aten::empty_strided", "aten::empty_like", "aten::view", "aten::as_strided",
    "aten::copy_", "aten::detach", "aten::detach_", "aten::alias", "aten::t", "aten::transpose",
    "aten::reshape", "aten::resize_", "aten::zeros", "aten::zeros_like", "aten::zero_",
    "aten::fill_", "aten::ones_like", "aten::to", "aten::_to_copy", "aten::split", "aten::slice",
    "aten::narrow", "aten::chunk", "aten::expand", "aten::clone", "aten::lift_fresh"})


def _category(name: str) -> SpanCategory | None:
    if name.startswith("gloo:"):
        return "collective"
    if name.startswith("FSDP::"):
        return "fsdp"
    if name.startswith("DistributedDataParallel"):
        return "ddp"
    if name.startswith(_BACKWARD_PREFIX):
        return None if name.endswith(_SKIP_BACKWARD) else "backward"
    if name.startswith("aten::"):
        return "forward"
    return None


def profile_artifact(events: Iterable[Any]) -> ProfileArtifact:
    """The spans worth reading from `prof.events()` (torch's FunctionEvents): see the module
    docstring. An aten op is kept only at the top of the model's own code: nothing above it
    but DDP's forward or the snippet's `record_function`s, and not an allocation, view or copy.
    So a linear layer is one span, not its addmm and views, and neither a piece of a backward
    node, nor DDP's reducer copying buckets back, nor FSDP's copies into its buffers."""
    kept: list[tuple[int, str, SpanCategory, float, float]] = []
    threads: dict[int, set[str]] = {}
    for e in events:
        name = str(e.name)
        parent = getattr(e, "cpu_parent", None)
        # An aten op counts when nothing above it is an op, a backward node or an FSDP step:
        # then it is the model's own forward (under DDP's forward or the snippet's annotations).
        top = name not in _BOOKKEEPING
        p = parent
        while p is not None and top:
            top = bool(getattr(p, "is_user_annotation", False)) and not str(p.name).startswith(
                ("FSDP::", "gloo:"))
            p = getattr(p, "cpu_parent", None)
        category = _category(name)
        if category is None and getattr(e, "is_user_annotation", False) and not name.startswith(
                ("ProfilerStep", "c10d::", "torch.distributed.ddp.reducer")):
            category = "annotation"
        if category is None or (name.startswith("aten::") and not top):
            continue
        thread = int(e.thread)
        threads.setdefault(thread, set()).add(category)
        label = name.removeprefix(_BACKWARD_PREFIX)
        kept.append((thread, _name(label), category, float(e.time_range.start), float(e.time_range.end)))
    # The main thread is the one running backward (or FSDP's or DDP's steps); an aten op on
    # another thread is a collective's own work (gloo slicing its buffers), not the model's.
    main = next((t for t, cats in threads.items() if cats & {"backward", "fsdp", "ddp"}),
                min(threads, default=0))
    kept = [k for k in kept if k[2] != "forward" or k[0] == main]
    threads = {t: {k[2] for k in kept if k[0] == t} for t in threads}
    threads = {t: cats for t, cats in threads.items() if cats}
    kept.sort(key=lambda k: (k[3], -k[4]))
    dropped = max(0, len(kept) - MAX_SPANS)
    kept = kept[:MAX_SPANS]
    t0 = kept[0][3] if kept else 0.0
    order = [main, *sorted(t for t in threads if t != main)]
    lanes, gloo = [], 0
    for t in order:
        if t == main:
            lanes.append("main")
        elif threads[t] == {"collective"}:
            gloo += 1
            lanes.append(f"gloo {gloo}")
        else:
            lanes.append(f"thread {t}")
    index = {t: i for i, t in enumerate(order)}
    spans = [ProfileSpan(lane=index[t], name=n, category=c, start_ms=round((s - t0) / 1000, 4),
                         end_ms=round((max(e, s) - t0) / 1000, 4))
             for t, n, c, s, e in kept]
    return ProfileArtifact(kind="profile", lanes=lanes or ["main"], spans=spans, dropped=dropped)


# --- flight recorder ---------------------------------------------------------------------

def flight_recorder_artifact(dump: dict[str, Any],
                             snippet_file: str = SNIPPET_FILE) -> FlightRecorderArtifact:
    """One rank's dump (torch's flight-recorder dict) as entries, oldest first."""
    raw = list(dump.get("entries") or [])[-MAX_ENTRIES:]
    t0 = min((int(e.get("time_created_ns") or 0) for e in raw), default=0)
    entries = []
    for e in raw:
        pg = e.get("process_group") or ["?"]
        frames = [FrameRef(line=int(f.get("line") or 0), function=_name(f.get("name", "?")))
                  for f in (e.get("frames") or []) if f.get("filename") == snippet_file]
        dtypes = e.get("input_dtypes") or []
        entries.append(FlightEntry(
            group=_name(pg[0] if isinstance(pg, list | tuple) else pg),
            collective_seq=int(e.get("collective_seq_id") or 0),
            p2p_seq=int(e.get("p2p_seq_id") or 0),
            op=_name(e.get("profiling_name") or "?"),
            state=_name(e.get("state") or "?"),
            input_sizes=[[int(x) for x in s] for s in (e.get("input_sizes") or [])][:64],
            output_sizes=[[int(x) for x in s] for s in (e.get("output_sizes") or [])][:64],
            dtype=str(dtypes[0]) if dtypes else "",
            created_ms=round(max(0, int(e.get("time_created_ns") or 0) - t0) / 1e6, 3),
            frames=frames[:16],
        ))
    return FlightRecorderArtifact(kind="flight_recorder", entries=entries)


# --- memory ------------------------------------------------------------------------------

def memory_artifact(data: dict[str, Any]) -> MemoryArtifact:
    """The snippet's own accounting: {"moment": ..., "rows": [{category, name, shape, dtype,
    bytes, new_bytes, note}, ...]}, checked."""
    return MemoryArtifact.model_validate({"kind": "memory", **data})


def build(kind: str, source: Any) -> ProfileArtifact | FlightRecorderArtifact | MemoryArtifact:
    """The artifact of a kind from what the snippet handed over (see the module docstring)."""
    if kind == "profile":
        return profile_artifact(source.events())
    if kind == "flight_recorder":
        if not isinstance(source, dict):
            raise TypeError("artifact(name, 'flight_recorder', dump): dump is the dict of "
                            "pickle.loads(torch._C._distributed_c10d._dump_fr_trace(True, True, False))")
        return flight_recorder_artifact(source)
    if kind == "memory":
        if not isinstance(source, dict):
            raise TypeError("artifact(name, 'memory', data): data is a dict with 'rows'")
        return memory_artifact(source)
    raise ValueError(f"artifact kind {kind!r}: one of {', '.join(ARTIFACT_KINDS)}")
