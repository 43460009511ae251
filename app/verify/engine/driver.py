"""The driver: the trusted half of one rank of an exercise run (docs/exercises.md).

The rank process forks its learner process (learner.py) before the gloo group exists,
then joins the group itself. It runs the exercise's reference solution with the
checks program here, on the real group, on the same secret data the learner's
checks will get (the reference's reports and bytes are what `reference: true` and
byte bounds compare with). Then it serves the learner process: each OP frame is
checked (wire.py, and the operation's own rules below), refused if the exercise
forbids it, performed on the real gloo group (sub-groups mirrored), recorded as
collective events with the bytes gloo put on the wire, and answered with the
outputs. It measures the learner's memory from outside (/proc) and counts the files
it left. Nothing the learner process says is believed beyond what is checked here;
a frame that breaks the protocol ends that rank's run with a clear error.
"""

from __future__ import annotations

import builtins
import collections
import contextlib
import fcntl
import hashlib
import itertools
import json
import math
import os
import secrets
import selectors
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import (
    AllgatherOptions,
    AllreduceCoalescedOptions,
    AllreduceOptions,
    AllToAllOptions,
    BarrierOptions,
    BroadcastOptions,
    GatherOptions,
    ReduceOp,
    ReduceOptions,
    ReduceScatterOptions,
    ScatterOptions,
)

from app.verify.engine import forbid, learner, wire
from app.verify.engine.probes import c10d
from app.verify.engine.probes.core import Recorder
from app.verify.engine.probes.sockets import GlooSockets

Emit = Callable[..., None]
PIPE_BYTES = 2**20
# How long the reference solution's file may take to appear (the leader writes it once the
# ranks exist) and the learner process to say READY.
SECRET_WAIT_S = 15.0
READY_WAIT_S = 30.0
# After END, how long the learner process gets to exit by itself.
EXIT_WAIT_S = 2.0
# In the run's folder (docs/sandbox.md): the reference solution (the ranks' uid only), each
# learner process's own folder, and the folder the learner processes share if the exercise
# asks for one (the reference phase gets one of its own).
REFERENCE_FILE = ".reference"
LEARNER_DIR = "learner-{rank}"
SHARED_DIR = "shared"
REFERENCE_SHARED_DIR = ".reference-shared"
# The file name the reference solution runs under (its tracebacks are authors' only).
REFERENCE_FILE_NAME = "reference.py"
SHARED_SEED_KEY = "ddpdrill/shared-seed"
HIDDEN_SEED_KEY = "ddpdrill/hidden-seed"
# What one secret_tensors call may ask for: elements in all, tensors.
SECRET_MAX_ELEMENTS = 2**24
SECRET_MAX_TENSORS = 16
# ... and all of one rank's calls in one phase together (256 MiB of float32).
SECRET_MAX_TOTAL = 2**26
# What a learner process calls itself (ps, and the leader's sweep, which does not count it).
LEARNER_NAME = "ddp-learner"
_REDUCE = {"SUM": ReduceOp.SUM, "PRODUCT": ReduceOp.PRODUCT, "MIN": ReduceOp.MIN,
           "MAX": ReduceOp.MAX, "BAND": ReduceOp.BAND, "BOR": ReduceOp.BOR,
           "BXOR": ReduceOp.BXOR, "AVG": ReduceOp.AVG}
_DTYPES = {name: getattr(torch, name) for name in wire.DTYPES}
_MAX_TAG = 2**31 - 1


class Refused(Exception):
    """An operation a real gloo group would refuse too: the learner's call raises this text."""

    def __init__(self, message: str, kind: str = "RuntimeError") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class Learner:
    """The driver's handle on its learner process."""

    pid: int
    to_learner: int
    from_learner: int
    workdir: str
    uid: int | None


def _widen(fd: int) -> None:
    with contextlib.suppress(OSError, AttributeError):
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)


def fork_learner(*, rank: int, world_size: int, limits: dict[str, Any], workdir: str,
                 uid: int | None) -> Learner:
    """Fork this rank's learner process (before any gloo socket exists in this process)."""
    to_r, to_w = os.pipe()
    from_r, from_w = os.pipe()
    for fd in (to_w, from_w):
        _widen(fd)
    pid = os.fork()
    if pid == 0:
        os.close(to_w)
        os.close(from_r)
        learner.main(rank=rank, world_size=world_size, from_driver=to_r, to_driver=from_w,
                     limits=limits, workdir=workdir, uid=uid)
    os.close(to_r)
    os.close(from_w)
    return Learner(pid, to_w, from_r, workdir, uid)


# --------------------------------------------------------------------------- secrets


@dataclass(frozen=True)
class SecretAsk:
    """One `secret_tensors` call, its fields checked: standard-normal float32 tensors of these
    shapes, drawn from the run's hidden seed and `key` (the same on every rank), and, with
    `flip_bit`, one bit flipped in one element of one of them (of tensor `only`, if given)
    on one rank drawn from `on_ranks`."""

    key: str
    shapes: tuple[tuple[int, ...], ...]
    flip_bit: int | None = None
    on_ranks: tuple[int, ...] = ()
    only: int | None = None

    @property
    def elements(self) -> int:
        return sum(math.prod(sh) for sh in self.shapes)

    @classmethod
    def parse(cls, header: dict[str, Any], world_size: int) -> SecretAsk:
        key = wire.text(header, "key", 100)
        shapes = header.get("shapes")
        if (not isinstance(shapes, list) or not 0 < len(shapes) <= SECRET_MAX_TENSORS
                or not all(isinstance(sh, list) and len(sh) <= wire.MAX_DIMS for sh in shapes)
                or not all(isinstance(d, int) and not isinstance(d, bool) and 0 < d <= 2**24
                           for sh in shapes for d in sh)):
            raise Refused("secret_tensors(): shapes must be a few lists of positive sizes",
                          "ValueError")
        total = sum(math.prod(sh) for sh in shapes)
        if total > SECRET_MAX_ELEMENTS:
            raise Refused(f"secret_tensors(): {total} elements is too many", "ValueError")
        flip = header.get("flip_bit")
        ranks = header.get("on_ranks") or []
        only = header.get("only")
        def small(v: Any, hi: int) -> bool:
            return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < hi

        flips_right = (small(flip, 32) and isinstance(ranks, list) and bool(ranks)
                       and all(small(r, world_size) for r in ranks)
                       and (only is None or small(only, len(shapes))))
        if flip is not None and not flips_right:
            raise Refused("secret_tensors(): flip_bit needs a bit (0-31) and ranks of this run "
                          "to flip it on", "ValueError")
        return cls(key, tuple(tuple(sh) for sh in shapes), flip,
                   tuple(ranks) if flip is not None else (), only if flip is not None else None)


def secret_tensors(ask: SecretAsk, *, hidden_seed: int, rank: int) -> list[torch.Tensor]:
    """The tensors `ask` describes, as this rank gets them. Only drivers hold the hidden seed:
    a learner process gets these tensors, never what they are drawn from, and only one rank
    learns (by holding it) which element was flipped, if any."""
    def draw(what: str) -> int:
        return int.from_bytes(hashlib.sha256(f"{hidden_seed}:{ask.key}:{what}".encode()).digest()[:8],
                              "little")

    gen = torch.Generator().manual_seed(draw("values") >> 1)
    out = [torch.randn(sh, generator=gen, dtype=torch.float32) for sh in ask.shapes]
    if ask.flip_bit is not None:
        # Drawn apart from the values: a rank that rebuilt the generator from the values it
        # holds would learn nothing of the flip.
        victim = ask.on_ranks[draw("rank") % len(ask.on_ranks)]
        which = ask.only if ask.only is not None else draw("tensor") % len(out)
        index = draw("element") % out[which].numel()
        if victim == rank:
            bits = out[which].view(-1).view(torch.int32)
            bits[index] ^= (1 << ask.flip_bit) if ask.flip_bit < 31 else -(2**31)
    return out


# --------------------------------------------------------------------------- memory


_STATUS_FIELDS = (b"RssAnon:", b"RssShmem:", b"VmHWM:")


@dataclass(frozen=True)
class Memory:
    """A process's memory as its /proc status gives it (readable whatever its owner)."""

    resident: int  # anonymous + shared-memory pages resident now
    peak: int  # the most pages it has had resident


def memory_of(pid: int) -> Memory | None:
    """A process's memory now; None once it has gone."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            text = f.read()
    except OSError:
        return None
    found: dict[bytes, int] = {}
    for line in text.splitlines():
        for name in _STATUS_FIELDS:
            if line.startswith(name):
                found[name] = int(line.split()[1]) * 1024
    if b"RssAnon:" not in found:
        return None
    return Memory(found[b"RssAnon:"] + found.get(b"RssShmem:", 0), found.get(b"VmHWM:", 0))


def used_bytes(path: str) -> int:
    """Bytes in use on the file system that holds `path`. In the sandbox that is the run's own
    scratch tmpfs, and statvfs reads it whatever the modes of the folders in it: a file the
    learner's process writes, in a folder it closed to others or unlinked while open, still
    counts. An error propagates (the rank fails) rather than reading as nothing written."""
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def files_of(root: str | None, uid: int | None) -> tuple[int, int]:
    """(bytes, files) of the regular files under `root` owned by `uid` (any owner if None)."""
    if not root:
        return 0, 0
    total = count = 0
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames:
            with contextlib.suppress(OSError):
                st = os.lstat(os.path.join(dirpath, name))
                if uid is None or st.st_uid == uid:
                    total += st.st_blocks * 512
                    count += 1
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
    return total, count


# --------------------------------------------------------------------------- operations


@dataclass
class _Group:
    pg: Any
    ranks: list[int]  # global ranks, in group-rank order

    @property
    def size(self) -> int:
        return len(self.ranks)


@dataclass
class _Op:
    op_id: int
    name: str           # as torch.distributed names it (all_reduce, recv, ...)
    api: str            # the ProcessGroup method the learner called
    seq: int
    sent0: int
    outputs: list[torch.Tensor]
    work: Any = None
    # Set by whoever saw the work complete (a future's callback, or a waiting thread): gloo's
    # point-to-point works must not be waited for twice.
    error: str | None = None
    # The rank's bytes on the wire when the work completed, read right then (as the in-process
    # probes do): read later, in the driver's loop, it would take in the bytes of the next
    # operation already under way (FSDP's prefetched all-gather in a reduce-scatter's count).
    sent_end: int = 0


@dataclass
class _Call:
    """A validated operation: how to start it on the real group, and what it fills."""

    start: Callable[[], Any]
    outputs: list[torch.Tensor]
    peer: int | None = None
    reduce_op: str | None = None


def _same(a: list[wire.Tensor], b: list[wire.Tensor], what: str) -> None:
    if a != b:
        raise Refused(f"{what}: the output tensors must match the inputs")


def _root(header: dict[str, Any], group: _Group) -> int:
    root = header.get("root")
    if not isinstance(root, int) or isinstance(root, bool) or not 0 <= root < group.size:
        raise Refused(f"invalid root rank {root!r} for a group of {group.size}")
    return root


def _reduce(header: dict[str, Any]) -> Any:
    name = header.get("reduce_op")
    if not isinstance(name, str) or name not in _REDUCE:
        raise Refused(f"unsupported reduce operation {str(name)[:40]!r}")
    return _REDUCE[name]


def _splits(header: dict[str, Any], key: str, size: int) -> list[int]:
    value = header.get(key)
    if not isinstance(value, list) or len(value) not in (0, size) or not all(
            isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**40 for v in value):
        raise Refused(f"{key} must be empty or {size} sizes")
    return list(value)


def _empty(spec: wire.Tensor) -> torch.Tensor:
    return torch.empty(spec.shape, dtype=_DTYPES[spec.dtype])


def _prepare(name: str, header: dict[str, Any], group: _Group, ins: list[wire.Tensor],
             outs: list[wire.Tensor], inputs: list[torch.Tensor], my_rank: int) -> _Call:
    """Check one operation as gloo's rules require and say how to start it (Refused if not)."""
    pg, n = group.pg, group.size
    label = OPS.get(name, name)  # what the learner called, in torch.distributed's words
    if name in ("allreduce", "allreduce_coalesced"):
        _same(ins, outs, name)
        if not ins:
            raise Refused(f"{label} needs at least one tensor")
        op = _reduce(header)
        if name == "allreduce":
            opts = AllreduceOptions()
            opts.reduceOp = op
            return _Call(lambda: pg.allreduce(inputs, opts), inputs, reduce_op=header["reduce_op"])
        copts = AllreduceCoalescedOptions()
        copts.reduceOp = op
        return _Call(lambda: pg.allreduce_coalesced(inputs, copts), inputs,
                     reduce_op=header["reduce_op"])
    if name in ("broadcast", "reduce"):
        _same(ins, outs, name)
        root = _root(header, group)
        root_tensor = header.get("root_tensor", 0)
        if not isinstance(root_tensor, int) or not 0 <= root_tensor < max(1, len(ins)):
            raise Refused("invalid root tensor")
        if name == "broadcast":
            bopts = BroadcastOptions()
            bopts.rootRank, bopts.rootTensor = root, root_tensor
            return _Call(lambda: pg.broadcast(inputs, bopts), inputs, peer=group.ranks[root])
        ropts = ReduceOptions()
        ropts.rootRank, ropts.rootTensor, ropts.reduceOp = root, root_tensor, _reduce(header)
        return _Call(lambda: pg.reduce(inputs, ropts), inputs, peer=group.ranks[root],
                     reduce_op=header["reduce_op"])
    if name in ("allgather", "allgather_coalesced"):
        if not ins or len(outs) != n * len(ins):
            raise Refused(f"{label}: expected {n} output tensors per input")
        outputs = [_empty(s) for s in outs]
        if name == "allgather":
            if any(outs[i * n + r] != ins[i] for i in range(len(ins)) for r in range(n)):
                raise Refused("all_gather: every output tensor must have the input's size")
            lists = [outputs[i * n:(i + 1) * n] for i in range(len(ins))]
            return _Call(lambda: pg.allgather(lists, inputs, AllgatherOptions()), outputs)
        if any(outs[r * len(ins) + i] != ins[i] for r in range(n) for i in range(len(ins))):
            raise Refused("all_gather_coalesced: the outputs must match the inputs")
        per_rank = [outputs[r * len(ins):(r + 1) * len(ins)] for r in range(n)]
        return _Call(lambda: pg.allgather_coalesced(per_rank, inputs, AllgatherOptions()), outputs)
    if name in ("all_gather_single", "all_gather_single_coalesced", "reduce_scatter_single",
                "reduce_scatter_single_coalesced"):
        if len(ins) != len(outs) or not ins:
            raise Refused(f"{label}: one output per input")
        gather = name.startswith("all_gather")
        for i, o in zip(ins, outs, strict=True):
            big, small = (o, i) if gather else (i, o)
            if big.dtype != small.dtype or big.numel != small.numel * n:
                raise Refused(f"{label}: the larger tensor must hold {n} times the smaller "
                              "one's elements")
        outputs = [_empty(s) for s in outs]
        if gather:
            if name == "all_gather_single":
                return _Call(lambda: pg.all_gather_single(outputs[0], inputs[0], AllgatherOptions()),
                             outputs)
            return _Call(lambda: pg.all_gather_single_coalesced(outputs, inputs, AllgatherOptions()),
                         outputs)
        rsopts = ReduceScatterOptions()
        rsopts.reduceOp = _reduce(header)
        if name == "reduce_scatter_single":
            return _Call(lambda: pg.reduce_scatter_single(outputs[0], inputs[0], rsopts), outputs,
                         reduce_op=header["reduce_op"])
        return _Call(lambda: pg.reduce_scatter_single_coalesced(outputs, inputs, rsopts), outputs,
                     reduce_op=header["reduce_op"])
    if name == "reduce_scatter":
        if not outs or len(ins) != n * len(outs) or any(
                ins[i * n + r] != outs[i] for i in range(len(outs)) for r in range(n)):
            raise Refused(f"reduce_scatter: expected {n} input tensors of each output's size")
        outputs = [_empty(s) for s in outs]
        lists = [inputs[i * n:(i + 1) * n] for i in range(len(outs))]
        rs2 = ReduceScatterOptions()
        rs2.reduceOp = _reduce(header)
        return _Call(lambda: pg.reduce_scatter(outputs, lists, rs2), outputs,
                     reduce_op=header["reduce_op"])
    if name == "all_to_all_single":
        if len(ins) != 1 or len(outs) != 1:
            raise Refused("all_to_all_single takes one input and one output")
        i, o = ins[0], outs[0]
        in_splits, out_splits = _splits(header, "in_splits", n), _splits(header, "out_splits", n)
        rows_in = i.shape[0] if i.shape else 0
        rows_out = o.shape[0] if o.shape else 0
        if i.dtype != o.dtype or i.shape[1:] != o.shape[1:]:
            raise Refused("all_to_all_single: input and output rows must have one dtype and shape")
        for splits, rows, what in ((in_splits, rows_in, "input"), (out_splits, rows_out, "output")):
            if splits and sum(splits) != rows:
                raise Refused(f"all_to_all_single: the {what} split sizes add up to "
                              f"{sum(splits)}, not {rows}")
            if not splits and rows % n:
                raise Refused(f"all_to_all_single: {rows} {what} rows do not split in {n}")
        outputs = [_empty(o)]
        return _Call(lambda: pg.all_to_all_single(outputs[0], inputs[0], out_splits, in_splits,
                                                  AllToAllOptions()), outputs)
    if name == "alltoall":
        if len(ins) != n or len(outs) != n:
            raise Refused(f"all_to_all takes {n} inputs and {n} outputs")
        outputs = [_empty(s) for s in outs]
        return _Call(lambda: pg.alltoall(outputs, inputs, AllToAllOptions()), outputs)
    if name in ("gather", "scatter"):
        root = _root(header, group)
        gopts = GatherOptions() if name == "gather" else ScatterOptions()
        gopts.rootRank = root
        me = group.ranks.index(my_rank)
        if name == "gather":
            want = n * len(ins) if me == root else 0
            if len(ins) != 1 or len(outs) != want or any(o != ins[0] for o in outs):
                raise Refused("gather: one input; on the root one output of its size per rank")
            outputs = [_empty(s) for s in outs]
            lists = [outputs] if me == root else []
            return _Call(lambda: pg.gather(lists, inputs, gopts), outputs, peer=group.ranks[root])
        want = n * len(outs) if me == root else 0
        if len(outs) != 1 or len(ins) != want or any(i != outs[0] for i in ins):
            raise Refused("scatter: one output; on the root one input of its size per rank")
        outputs = [_empty(s) for s in outs]
        lists = [inputs] if me == root else []
        return _Call(lambda: pg.scatter(outputs, lists, gopts), outputs, peer=group.ranks[root])
    if name == "barrier":
        if ins or outs:
            raise Refused("barrier takes no tensors")
        return _Call(lambda: pg.barrier(BarrierOptions()), [])
    if name in ("send", "recv"):
        peer, tag = header.get("peer"), header.get("tag", 0)
        me = group.ranks.index(my_rank)
        if not isinstance(peer, int) or isinstance(peer, bool) or not 0 <= peer < n or peer == me:
            raise Refused(f"invalid peer rank {peer!r} for a group of {n} (rank {me} is this one)")
        if not isinstance(tag, int) or isinstance(tag, bool) or not 0 <= tag <= _MAX_TAG:
            raise Refused(f"invalid tag {tag!r}")
        if name == "send":
            if len(ins) != 1 or outs:
                raise Refused("send takes one tensor")
            return _Call(lambda: pg.send(inputs, peer, tag), [], peer=group.ranks[peer])
        if ins or len(outs) != 1:
            raise Refused("recv takes one tensor")
        outputs = [_empty(outs[0])]
        return _Call(lambda: pg.recv(outputs, peer, tag), outputs, peer=group.ranks[peer])
    raise wire.ProtocolError(f"unknown operation {name[:40]!r}")


# The ProcessGroup methods a learner process may call, by the torch.distributed name each is.
OPS: dict[str, str] = {
    "allreduce": "all_reduce", "allreduce_coalesced": "all_reduce_coalesced",
    "broadcast": "broadcast", "reduce": "reduce", "allgather": "all_gather",
    "allgather_coalesced": "all_gather_coalesced", "all_gather_single": "all_gather_into_tensor",
    "all_gather_single_coalesced": "all_gather_into_tensor", "reduce_scatter": "reduce_scatter",
    "reduce_scatter_single": "reduce_scatter_tensor",
    "reduce_scatter_single_coalesced": "reduce_scatter_tensor",
    "all_to_all_single": "all_to_all_single", "alltoall": "all_to_all", "gather": "gather",
    "scatter": "scatter", "barrier": "barrier", "send": "send", "recv": "recv",
}


def _as_bytes(t: torch.Tensor) -> memoryview:
    return wire.buffer(t.contiguous()) if t.numel() else memoryview(b"")


@dataclass
class Ending:
    """How the learner process's part of the run ended, as the driver saw it."""

    ok: bool = False
    phase: str | None = None
    exception: dict[str, Any] | None = None
    protocol_error: str | None = None
    # The learner process's peak resident memory when it said END (its /proc entry is gone
    # once it has exited).
    peak: int | None = None


@dataclass
class Serve:
    """The learner phase of one rank: the driver answering its learner process."""

    learner: Learner
    rank: int
    world_size: int
    emit: Emit
    sockets: GlooSockets
    forbidden: frozenset[str]
    seq: Callable[[], int]
    groups: dict[str, _Group] = field(default_factory=dict)
    ops: dict[int, _Op] = field(default_factory=dict)
    baseline: Memory = field(default_factory=lambda: Memory(0, 0))
    hidden_seed: int = 0
    files_baseline: int = 0
    ops_started: int = 0
    ending: Ending = field(default_factory=Ending)
    _ended: bool = False

    def __post_init__(self) -> None:
        self._done: collections.deque[int] = collections.deque()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._used_ids: set[int] = set()
        self._secret_keys: set[str] = set()
        self._secret_elements = 0

    # -- the learner's frames
    def ready(self, world: _Group, timeout_s: float) -> dict[str, Any]:
        """Wait for READY; map the learner's default group onto `world`; take the baseline."""
        sel = selectors.DefaultSelector()
        sel.register(self.learner.from_learner, selectors.EVENT_READ)
        if not sel.select(timeout_s):
            raise wire.ProtocolError("the learner process did not get ready in time")
        sel.close()
        frame = wire.read_frame(self.learner.from_learner, frozenset({wire.READY}))
        if frame is None:
            raise EOFError
        _kind, header, size = frame
        if size:
            raise wire.ProtocolError("a READY frame with a payload")
        name = wire.text(header, "world", 200)
        self.groups[name] = world
        sample = memory_of(self.learner.pid)
        self.baseline = sample or Memory(0, 0)
        self.files_baseline = used_bytes(os.path.dirname(self.learner.workdir))
        return header

    def send(self, kind: int, header: dict[str, Any], payload: list[memoryview] | None = None) -> None:
        if self.learner.to_learner < 0:
            return
        with contextlib.suppress(OSError):  # the learner is gone; its end is read from its pipe
            wire.send(self.learner.to_learner, kind, header, payload or [])

    def serve(self) -> Ending:
        sel = selectors.DefaultSelector()
        sel.register(self.learner.from_learner, selectors.EVENT_READ, "learner")
        sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        try:
            while not self._ended:
                for key, _ in sel.select():
                    if key.data == "wake":
                        self._completions()
                    elif not self._ended:
                        self._frame()
            self._drain()
        finally:
            sel.close()
        return self.ending

    def _frame(self) -> None:
        fd = self.learner.from_learner
        try:
            frame = wire.read_frame(fd, wire.FROM_LEARNER)
            if frame is None:
                self._ended = True
                return
            kind, header, size = frame
            if kind == wire.OP:
                self._start(header, size)
                return
            if kind == wire.SECRET and not size:
                self._secret(header)
                return
            if size:
                raise wire.ProtocolError("a frame with a payload it may not carry")
            if kind == wire.REPORT:
                self._report(header)
            elif kind == wire.MARK:
                self._mark(header)
            elif kind == wire.NEW_GROUP:
                self._new_group(header)
            elif kind == wire.END:
                self._end(header)
            else:
                raise wire.ProtocolError("a second READY frame")
        except wire.ProtocolError as exc:
            self.ending.protocol_error = str(exc)
            self._ended = True
            self.close_pipe()
        except OSError as exc:  # the pipe broke under a frame: the learner died in mid-write
            self._ended = True
            if self.ending.exception is None and not self.ending.ok:
                self.ending.protocol_error = f"the learner's pipe broke: {exc}"

    def _secret(self, header: dict[str, Any]) -> None:
        """Answer a SECRET frame like an OP (ACK, then DONE with the tensors). Each key is given
        once: a second ask for it (code that would compare the checks' data with a fresh copy)
        is refused."""
        op_id = wire.integer(header, "id", 1, 2**62)
        if op_id in self._used_ids:
            raise wire.ProtocolError("an operation id used twice")
        self._used_ids.add(op_id)
        try:
            ask = SecretAsk.parse(header, self.world_size)
            if ask.key in self._secret_keys:
                raise Refused(f"secret_tensors({ask.key!r}) was asked for already: each key is "
                              "given once", "RuntimeError")
            if self._secret_elements + ask.elements > SECRET_MAX_TOTAL:
                raise Refused("secret_tensors(): more secret data than one run may have",
                              "RuntimeError")
            self._secret_keys.add(ask.key)
            self._secret_elements += ask.elements
            out = secret_tensors(ask, hidden_seed=self.hidden_seed, rank=self.rank)
        except Refused as exc:
            self.send(wire.ACK, {"id": op_id, "ok": False, "error": str(exc), "type": exc.kind})
            return
        except (RuntimeError, MemoryError) as exc:  # this driver's memory: the run's limit
            raise wire.ProtocolError(f"secret_tensors() could not be made: {exc}") from None
        self.send(wire.ACK, {"id": op_id, "ok": True})
        self.send(wire.DONE, {"id": op_id, "ok": True,
                              "tensors": [[str(t.dtype).removeprefix("torch."), list(t.shape)]
                                          for t in out]},
                  [_as_bytes(t) for t in out])

    def _report(self, header: dict[str, Any]) -> None:
        name = wire.text(header, "name", 200)
        source = header.get("source")
        if source not in ("learner", "checks") or "value" not in header:
            raise wire.ProtocolError("a REPORT frame without a source or a value")
        self.emit("report", name=name, value=header["value"], iteration=None, source=source)

    def _mark(self, header: dict[str, Any]) -> None:
        mark_id = wire.integer(header, "id", 1, 2**62)
        name = wire.text(header, "name", 100)
        sample = memory_of(self.learner.pid)
        if self.learner.uid is None:  # no sandbox: the folder is this process's to walk
            files = files_of(self.learner.workdir, None)[0]
        else:  # the run's tmpfs, shared by its ranks: what any of them wrote since it began
            files = max(0, used_bytes(os.path.dirname(self.learner.workdir)) - self.files_baseline)
        held = sample.resident - self.baseline.resident if sample else 0
        growth = held + files
        self.emit("memory_mark", name=name, bytes=max(0, growth), ops=self.ops_started,
                  source="learner")
        self.send(wire.MARKED, {"id": mark_id})

    def _end(self, header: dict[str, Any]) -> None:
        ok = header.get("ok")
        if ok is True:
            self.ending.ok = True
        elif ok is False:
            phase = header.get("phase")
            exc = header.get("exception")
            if phase not in ("learner", "checks") or not isinstance(exc, dict):
                raise wire.ProtocolError("an END frame without its phase and exception")
            self.ending.phase = phase
            self.ending.exception = _exception(exc)
        else:
            raise wire.ProtocolError("an END frame without ok")
        self._ended = True
        sample = memory_of(self.learner.pid)
        self.ending.peak = sample.peak if sample else None
        # Its part is over: closing its pipe tells it to exit (it runs as another uid, so the
        # driver cannot signal it; if it lingers, it dies with the driver, PR_SET_PDEATHSIG).
        self.close_pipe()

    def _new_group(self, header: dict[str, Any]) -> None:
        group_id = wire.integer(header, "id", 1, 2**62)
        name = wire.text(header, "name", 200)
        ranks = header.get("ranks")
        if not isinstance(ranks, list) or not ranks or len(set(map(str, ranks))) != len(ranks) \
                or not all(isinstance(r, int) and not isinstance(r, bool)
                           and 0 <= r < self.world_size for r in ranks):
            raise wire.ProtocolError("a NEW_GROUP frame whose ranks are not distinct ranks of the run")
        if name in self.groups:
            self.send(wire.GROUP, {"id": group_id, "ok": False,
                                   "error": f"a process group named {name!r} exists already"})
            return
        try:
            # torch names a group by a counter, or by a hash of its ranks when only its members
            # create it (use_local_synchronization): the same call on the real group.
            pg = dist.new_group(ranks, use_local_synchronization=not name.isdigit())
        except Exception as exc:
            self.send(wire.GROUP, {"id": group_id, "ok": False, "error": str(exc)[:2000]})
            return
        if self.rank in ranks:
            self.groups[name] = _Group(pg, list(ranks))
        self.sockets.invalidate()  # a new group opens new gloo sockets
        self.send(wire.GROUP, {"id": group_id, "ok": True})

    def _start(self, header: dict[str, Any], size: int) -> None:
        fd = self.learner.from_learner
        op_id = wire.integer(header, "id", 1, 2**62)
        if op_id in self._used_ids:
            raise wire.ProtocolError(f"operation id {op_id} used twice")
        self._used_ids.add(op_id)
        api = wire.text(header, "op", 40)
        if api not in OPS:
            raise wire.ProtocolError(f"unknown operation {api!r}")
        group = self.groups.get(str(header.get("group")))
        if group is None:
            raise wire.ProtocolError("an operation on a process group the driver does not know")
        ins = wire.tensor_specs(header.get("in"), "inputs")
        outs = wire.tensor_specs(header.get("out"), "outputs")
        need = sum(s.nbytes for s in ins)
        if need != size:
            raise wire.ProtocolError(f"the payload has {size} bytes; the inputs take {need}")
        line = header.get("line")
        if line is not None and (not isinstance(line, int) or isinstance(line, bool)
                                 or not 0 <= line < 2**31):
            raise wire.ProtocolError("'line' is not a line number")
        if sum(s.nbytes for s in outs) > wire.MAX_PAYLOAD_BYTES:
            raise wire.ProtocolError(f"outputs of more than {wire.MAX_PAYLOAD_BYTES} bytes")
        inputs = []
        for s in ins:
            try:
                t = _empty(s)
            except (RuntimeError, MemoryError):  # more than the driver may allocate
                raise wire.ProtocolError(f"a tensor of {s.nbytes} bytes, more than the driver "
                                         "can hold") from None
            if s.nbytes:
                wire.read_into(fd, wire.buffer(t))
            inputs.append(t)
        name = OPS[api]
        self.ops_started += 1
        seq = self.seq()
        start_t = time.monotonic_ns()
        sent0 = self.sockets.total()
        first = (ins or outs)[0] if (ins or outs) else None
        info: dict[str, Any] = {"group_size": group.size,
                                "shape": list(first.shape) if first is not None else None,
                                "dtype": first.dtype if first is not None else None,
                                "bytes": need if ins else sum(s.nbytes for s in outs),
                                "source": "learner", "line": line, "api": f"ProcessGroup.{api}",
                                "async": True}
        if len(ins) > 1:
            info["count"] = len(ins)
        if group.ranks != list(range(self.world_size)):
            info["group_ranks"] = group.ranks
        try:
            if name in self.forbidden:
                raise Refused(forbid.message(name, self.forbidden), "ForbiddenCollective")
            call = _prepare(api, header, group, ins, outs, inputs, self.rank)
            if call.peer is not None:
                info["peer"] = call.peer
            if call.reduce_op is not None:
                info["reduce_op"] = call.reduce_op
            self.emit("collective_start", t=start_t, op=name, seq=seq, iteration=None, **info)
            work = call.start()
        except Refused as exc:
            self._refuse(op_id, name, seq, start_t, sent0, info, str(exc), exc.kind)
            return
        except Exception as exc:  # gloo refused it at once
            self._refuse(op_id, name, seq, start_t, sent0, info, str(exc)[:2000], "RuntimeError",
                         started=True)
            return
        op = _Op(op_id, name, api, seq, sent0, call.outputs, work)
        self.ops[op_id] = op
        self._watch(op)
        self.send(wire.ACK, {"id": op_id, "ok": True})

    def _refuse(self, op_id: int, name: str, seq: int, start_t: int, sent0: int,
                info: dict[str, Any], message: str, kind: str, *, started: bool = False) -> None:
        if not started:
            self.emit("collective_start", t=start_t, op=name, seq=seq, iteration=None, **info)
        self.emit("collective_end", op=name, seq=seq, bytes_sent=0, sent_total=sent0,
                  error=f"{kind}: {message}"[:2000])
        self.send(wire.ACK, {"id": op_id, "ok": False, "error": message, "type": kind})

    def _watch(self, op: _Op) -> None:
        try:
            fut = op.work.get_future()
        except Exception:  # gloo's send and recv give no future: wait in a thread
            fut = None
        if fut is not None:
            fut.add_done_callback(lambda f, o=op: self._completed(o, f.value))
            return
        threading.Thread(target=self._completed, args=(op, op.work.wait), daemon=True,
                         name="ddpdrill-wait").start()

    def _completed(self, op: _Op, wait: Callable[[], Any]) -> None:
        try:
            wait()
        except Exception as exc:
            op.error = str(exc)[:2000] or type(exc).__name__
        op.sent_end = self.sockets.total()
        self._notify(op.op_id)

    def _notify(self, op_id: int) -> None:
        self._done.append(op_id)
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._wake_w, b"!")

    def _completions(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_r, 4096):
                pass
        while self._done:
            self._finish(self._done.popleft())

    def _finish(self, op_id: int) -> None:
        op = self.ops.pop(op_id, None)
        if op is None:
            return
        error = op.error
        sent = op.sent_end  # set by _completed, the only way an operation reaches here
        self.emit("collective_end", op=op.name, seq=op.seq, bytes_sent=max(0, sent - op.sent0),
                  sent_total=sent, error=error)
        if error is not None:
            self.send(wire.DONE, {"id": op_id, "ok": False, "error": error})
            return
        self.send(wire.DONE, {"id": op_id, "ok": True,
                              "tensors": [[str(t.dtype).removeprefix("torch."), list(t.shape)]
                                          for t in op.outputs]},
                  [_as_bytes(t) for t in op.outputs])

    def _drain(self) -> None:
        """After the learner's end: let the operations still in flight finish (as destroying the
        group would wait for them), bounded by gloo's own timeout."""
        while self.ops:
            ready = os.read(self._wake_r, 4096) if self._wait_wake() else b""
            if not ready:
                break
            self._completions()

    def _wait_wake(self) -> bool:
        sel = selectors.DefaultSelector()
        sel.register(self._wake_r, selectors.EVENT_READ)
        try:
            return bool(sel.select(30.0))
        finally:
            sel.close()

    def close_pipe(self) -> None:
        """Close the driver's end of the pipe to the learner process (once)."""
        if self.learner.to_learner >= 0:
            with contextlib.suppress(OSError):
                os.close(self.learner.to_learner)
            self.learner.to_learner = -1

    def close(self) -> None:
        self.close_pipe()
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)


def _exception(exc: dict[str, Any]) -> dict[str, Any]:
    """A learner-reported exception, its fields checked and capped (it is shown, never believed)."""
    def s(key: str, cap: int) -> str:
        value = exc.get(key)
        return value[:cap] if isinstance(value, str) else ""
    line = exc.get("line")
    out: dict[str, Any] = {"type": s("type", 200) or "Exception", "message": s("message", 4000),
                           "line": line if isinstance(line, int) and not isinstance(line, bool)
                           and 0 <= line < 2**31 else None,
                           "traceback": s("traceback", 16_000)}
    code = exc.get("exit_code")
    if isinstance(code, int) and not isinstance(code, bool) and 0 <= code < 256:
        out["exit_code"] = code
    return out


# --------------------------------------------------------------------------- one rank


class _Sent:
    """Bytes this rank has put on gloo's sockets since `base` (one phase of the run)."""

    def __init__(self, sockets: GlooSockets) -> None:
        self.sockets = sockets
        self.base = sockets.total()

    def total(self) -> int:
        return max(0, self.sockets.total() - self.base)

    def invalidate(self) -> None:
        self.sockets.invalidate()


def _seeds(store: Any, rank: int) -> tuple[int, int, int]:
    """(this rank's secret seed, the seed every rank shares, the seed only the drivers hold):
    drawn here, after the learner process was forked, so that no learner process ever holds
    another rank's seed, nor the hidden one (`secret_tensors`). The shared ones go through
    the rendezvous store, which learner processes cannot reach."""
    own = secrets.randbits(63)
    if rank == 0:
        shared, hidden = secrets.randbits(63), secrets.randbits(63)
        store.set(SHARED_SEED_KEY, str(shared))
        store.set(HIDDEN_SEED_KEY, str(hidden))
    else:
        store.wait([SHARED_SEED_KEY, HIDDEN_SEED_KEY])
        shared = int(store.get(SHARED_SEED_KEY))
        hidden = int(store.get(HIDDEN_SEED_KEY))
    return own, shared, hidden


def _read_reference(workdir: str) -> str | None:
    """The reference solution's code, which the leader writes (readable by the ranks only) once
    every rank, and so every learner process, exists; None for a run without one."""
    path = os.path.join(workdir, REFERENCE_FILE)
    deadline = time.monotonic() + SECRET_WAIT_S
    while True:
        try:
            with open(path) as f:
                text = f.read()
            return json.loads(text).get("reference") if text else None
        except FileNotFoundError:
            if time.monotonic() >= deadline:
                raise TimeoutError("the run's reference solution never arrived") from None
            time.sleep(0.002)


def run_rank(exercise: tuple[str, str, dict[str, Any]], *, learner: Learner, rank: int,
             world_size: int, params: dict[str, Any], emit: Emit, store: Any, port: int,
             workdir: str, limits: dict[str, Any]) -> int:
    """One rank of an exercise run, after the gloo group formed: the reference phase here, then
    the learner phase; returns the rank's exit status. Every event it emits is its own."""
    code, checks, options = exercise
    rank_seed, shared_seed, hidden_seed = _seeds(store, rank)
    shared = os.path.join(workdir, SHARED_DIR) if options.get("shared_folder") else None
    program = {"code": code, "checks": checks, "rank": rank, "world_size": world_size,
               "params": params, "rank_seed": rank_seed, "shared_seed": shared_seed,
               "shared_folder": shared}
    sockets = GlooSockets(port)
    seq = itertools.count(1)
    try:
        reference = _read_reference(workdir)
    except TimeoutError as exc:
        emit("setup_error", type="TimeoutError", message=str(exc), line=None, traceback="")
        return 1
    if reference is not None:
        sent = _Sent(sockets)
        failure = reference_phase(reference, program, emit=emit, sockets=sockets,
                                  shared=os.path.join(workdir, REFERENCE_SHARED_DIR)
                                  if shared else None, hidden_seed=hidden_seed)
        emit("reference_end", bytes_sent=sent.total(), ok=failure is None)
        if failure is not None:
            emit("exception", **failure, sent_total=0, phase="reference")
            return 1
    return _learner_phase(program, learner=learner, rank=rank, world_size=world_size, emit=emit,
                          sockets=sockets, seq=lambda: next(seq), options=options, shared=shared,
                          hidden_seed=hidden_seed)


def _learner_phase(program: dict[str, Any], *, learner: Learner, rank: int, world_size: int,
                   emit: Emit, sockets: GlooSockets, seq: Callable[[], int],
                   options: dict[str, Any], shared: str | None, hidden_seed: int) -> int:
    sent = _Sent(sockets)
    serve = Serve(learner=learner, rank=rank, world_size=world_size, emit=emit,
                  hidden_seed=hidden_seed,
                  sockets=sent,  # type: ignore[arg-type]
                  forbidden=forbid.operations(options.get("forbid", [])), seq=seq)
    world = _Group(dist.distributed_c10d._get_default_group(), list(range(world_size)))
    confined = False
    peak0 = 0
    try:
        header = serve.ready(world, READY_WAIT_S)
        confined = header.get("confined") is True
        sample = memory_of(learner.pid)
        peak0 = sample.peak if sample else 0
        emit("snippet_start", checks=True)
        serve.send(wire.PROGRAM, program)
        ending = serve.serve()
    except wire.ProtocolError as exc:
        ending = Ending(protocol_error=str(exc))
    except EOFError:
        ending = Ending()
    finally:
        serve.close()
    # A process that said END was told to exit; one that did not is gone or going: its status.
    exit_code = None if ending.ok or ending.exception is not None else _reap(learner.pid)
    files = files_of(shared, learner.uid)[1] if shared else None
    emit("learner_end", exit_code=exit_code, confined=confined and learner.uid is not None,
         peak_bytes=max(0, ending.peak - peak0) if ending.peak else None, files=files,
         sent_total=sent.total())
    return _outcome(ending, emit, sent.total(), exit_code)


def _outcome(ending: Ending, emit: Emit, sent: int, exit_code: int | None) -> int:
    """The rank's last events, from how its learner process ended; the rank's exit status."""
    if ending.protocol_error is not None:
        emit("protocol_error", detail=ending.protocol_error[:300])
        return 1
    if ending.ok:
        emit("snippet_end", sent_total=sent)
        emit("checks_done")
        return 0
    if ending.exception is not None:
        emit("exception", **ending.exception, phase=ending.phase, sent_total=sent)
        return 1
    how = (f"killed by {signal.Signals(-exit_code).name}" if exit_code is not None and exit_code < 0
           else f"exited with status {exit_code}")
    emit("exception", type="LearnerExit", line=None, traceback="", phase="learner",
         message=f"the learner process {how} before the checks finished", sent_total=sent,
         **({"exit_code": exit_code & 0xFF} if exit_code is not None and exit_code >= 0 else {}))
    return 1


def _reap(pid: int) -> int | None:
    """The learner process's exit status (-signal if killed), once its pipe is closed; None if
    it has not exited within EXIT_WAIT_S (it then dies with this process)."""
    deadline = time.monotonic() + EXIT_WAIT_S
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.001)


class _Counter(Recorder):
    """Counts the collectives that reach c10d during the reference phase (marks' positions);
    it writes no event: the reference's trace is not the learner's."""

    def __init__(self, sockets: GlooSockets) -> None:
        super().__init__(self._count, store_port=0)
        self.sockets = sockets
        self.ops = 0

    def _count(self, kind: str, **_fields: Any) -> None:
        if kind == "collective_start":
            self.ops += 1


def reference_phase(reference: str, program: dict[str, Any], *, emit: Emit, sockets: GlooSockets,
                    shared: str | None, hidden_seed: int) -> dict[str, Any] | None:
    """Run the reference solution and the checks program here, on the real group and the same
    secret data; their reports are the reference values. The failure, if it failed."""
    counter = _Counter(sockets)
    c10d.install(counter)

    def report(name: str, value: Any) -> None:
        emit("report", name=str(name), value=learner.jsonable(value), iteration=None,
             source="reference")

    def mark_memory(name: str) -> None:
        emit("memory_mark", name=str(name)[:100], bytes=0, ops=counter.ops, source="reference")

    given: set[str] = set()

    def secret(key: str, shapes: list[list[int]], flip_bit: int | None = None,
               on_ranks: list[int] | None = None, only: int | None = None) -> list[torch.Tensor]:
        """The learner process's secret_tensors, here: the same tensors, the same rules."""
        ask = SecretAsk.parse(learner.secret_header(key, shapes, flip_bit, on_ranks, only),
                              world_size)
        if ask.key in given:
            raise RuntimeError(f"secret_tensors({ask.key!r}) was asked for already: each key "
                               "is given once")
        given.add(ask.key)
        return secret_tensors(ask, hidden_seed=hidden_seed, rank=rank)

    if shared is not None:
        os.makedirs(shared, exist_ok=True)
    rank, world_size = int(program["rank"]), int(program["world_size"])
    torch.manual_seed(int(program["rank_seed"]))
    ns: dict[str, Any] = {"__name__": "__reference__", "__file__": REFERENCE_FILE_NAME,
                          "__builtins__": builtins, "rank": rank, "world_size": world_size,
                          "params": json.loads(json.dumps(program["params"])), "report": report}
    try:
        exec(compile(reference, REFERENCE_FILE_NAME, "exec", dont_inherit=True), ns)
        checks_ns = {k: v for k, v in ns.items() if not (k.startswith("__") and k.endswith("__"))}
        checks_ns.update(__name__="__checks__", __file__=forbid.CHECKS_FILE, __builtins__=builtins,
                         rank_seed=int(program["rank_seed"]),
                         shared_seed=int(program["shared_seed"]), mark_memory=mark_memory,
                         secret_tensors=secret, shared_folder=shared)
        exec(compile(program["checks"], forbid.CHECKS_FILE, "exec", dont_inherit=True), checks_ns)
        for work in list(counter.pending.values()):
            work.wait()
    except BaseException as exc:
        info = learner.exception_info(exc)
        info["message"] = f"the reference solution failed: {info['message']}"[:4000]
        return info
    finally:
        c10d.uninstall()
    return None
