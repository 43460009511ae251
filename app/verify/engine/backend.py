# torch's stubs type ProcessGroup's methods by their C++ overloads; a Python process group
# overrides them the way torch's own multi_threaded_pg.py does.
# mypy: disable-error-code="override"
"""torch.distributed inside a learner process: a process group that forwards every operation
to the rank's driver (docs/exercises.md, "How a run executes").

The learner process has no network and no gloo: `DriverGroup` is a Python
`ProcessGroup` (registered with `dist.Backend.register_backend`, after torch's own
multi_threaded_pg.py) whose every collective and point-to-point call becomes one
OP frame to the driver, with its inputs' bytes. The driver answers ACK when it has
started the operation on the real gloo group (or refused it: a forbidden
collective raises here, at the learner's call), and DONE with the outputs' bytes
when it completes; a reader thread copies them into the caller's tensors and
completes the Work's future, so `wait()`, `get_future().then(...)` and C++
callers (DDP's reducer, functional collectives, DTensor, fully_shard) behave as
on gloo. Nothing here is trusted: the driver checks every frame, performs the
operation itself and records what it saw.
"""

from __future__ import annotations

import itertools
import os
import sys
import threading
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import (  # type: ignore[attr-defined]
    AllreduceCoalescedOptions,
    AllreduceOptions,
    BroadcastOptions,
    GatherOptions,
    ReduceOp,
    ReduceOptions,
    ReduceScatterOptions,
    ScatterOptions,
    _create_work_from_future,
)
from torch.futures import Future

from app.verify.engine import wire
from app.verify.engine.forbid import SNIPPET_FILE

BACKEND = "ddpdrill"
_REDUCE_OPS: dict[Any, str] = {ReduceOp.SUM: "SUM", ReduceOp.PRODUCT: "PRODUCT", ReduceOp.MIN: "MIN",
               ReduceOp.MAX: "MAX", ReduceOp.BAND: "BAND", ReduceOp.BOR: "BOR",
               ReduceOp.BXOR: "BXOR", ReduceOp.AVG: "AVG"}


class DriverGone(RuntimeError):
    """The driver closed the pipe: the run is over."""


def dtype_name(t: torch.Tensor) -> str:
    name = str(t.dtype).removeprefix("torch.")
    if name not in wire.DTYPES:
        raise TypeError(f"a collective on {t.dtype} tensors is not supported in exercises")
    return name


def spec(t: torch.Tensor) -> list[Any]:
    return [dtype_name(t), list(t.shape)]


def as_bytes(t: torch.Tensor) -> memoryview:
    """The tensor's contents as bytes (a contiguous copy when it is not contiguous)."""
    flat = t.detach().contiguous()
    return wire.buffer(flat) if flat.numel() else memoryview(b"")


class _Waiter:
    """One request's reply, handed over by the reader thread."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.header: dict[str, Any] = {}


class _Pending:
    """An operation the driver runs: where its outputs go, and the future to complete."""

    def __init__(self, outputs: list[torch.Tensor], result: list[torch.Tensor]) -> None:
        self.outputs = outputs
        self.result = result
        self.future: Future[list[torch.Tensor]] = Future()


class Link:
    """The learner's end of the two pipes to its driver: writes from any thread, one reader."""

    def __init__(self, from_driver: int, to_driver: int) -> None:
        self.rfd, self.wfd = from_driver, to_driver
        self._write = threading.Lock()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._waiters: dict[int, _Waiter] = {}
        self._pending: dict[int, _Pending] = {}
        self.closed: str | None = None
        self.gone = threading.Event()
        self._reader: threading.Thread | None = None
        # True while the reader completes an operation: it holds the operation's tensors until
        # then, and a memory mark taken meanwhile would count them (settle()).
        self._completing = False
        self._settled = threading.Condition()

    def next_id(self) -> int:
        with self._lock:
            return next(self._ids)

    def send(self, kind: int, header: dict[str, Any], payload: Sequence[memoryview] = ()) -> None:
        if self.closed is not None:
            raise DriverGone(self.closed)
        with self._write:
            wire.send(self.wfd, kind, header, payload)

    def request(self, kind: int, header: dict[str, Any],
                payload: Sequence[memoryview] = (), pending: _Pending | None = None) -> dict[str, Any]:
        """Send a frame that the driver answers (by its `id`) and return the answer's header."""
        waiter = _Waiter()
        with self._lock:
            if self.closed is not None:
                raise DriverGone(self.closed)
            self._waiters[header["id"]] = waiter
            if pending is not None:
                self._pending[header["id"]] = pending
        self.send(kind, header, payload)
        waiter.event.wait()
        if self.closed is not None and not waiter.header:
            raise DriverGone(self.closed)
        return waiter.header

    def fetch(self, kind: int, header: dict[str, Any], outputs: list[torch.Tensor]) -> list[torch.Tensor]:
        """Ask the driver for tensors (SECRET), answered like an operation: ACK, then DONE with
        the outputs' contents."""
        pending = _Pending(outputs, outputs)
        answer = self.request(kind, header, pending=pending)
        if not answer.get("ok"):
            if answer.get("type") == "ValueError":
                raise ValueError(str(answer.get("error", "")))
            raise _refusal(answer)
        return pending.future.wait()

    def settle(self, timeout_s: float = 5.0) -> None:
        """Wait until the reader is not completing an operation. The caller's thread was woken
        by a future the reader completed, and until the reader returns from that, it still
        holds the operation's tensors (a temporary output the caller has already dropped)."""
        with self._settled:
            self._settled.wait_for(lambda: not self._completing, timeout_s)

    def receive_program(self) -> dict[str, Any]:
        """The PROGRAM frame, read before the reader thread starts."""
        frame = wire.read_frame(self.rfd, frozenset({wire.PROGRAM}))
        if frame is None:
            raise DriverGone("the driver closed the pipe before sending the program")
        _kind, header, size = frame
        wire.skip(self.rfd, size)
        return header

    def start(self) -> None:
        self._reader = threading.Thread(target=self._read, name="ddpdrill-link", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        why = "the driver closed the pipe"
        try:
            while True:
                frame = wire.read_frame(self.rfd, wire.FROM_DRIVER)
                if frame is None:
                    break
                kind, header, size = frame
                if kind == wire.DONE:
                    with self._settled:
                        self._completing = True
                    try:
                        self._done(header, size)
                    finally:
                        with self._settled:
                            self._completing = False
                            self._settled.notify_all()
                    continue
                wire.skip(self.rfd, size)
                with self._lock:
                    waiter = self._waiters.pop(header.get("id", -1), None)
                    if kind == wire.ACK and not header.get("ok"):
                        self._pending.pop(header.get("id", -1), None)
                if waiter is not None:
                    waiter.header = header
                    waiter.event.set()
        except (OSError, wire.ProtocolError) as exc:
            why = f"the pipe to the driver broke: {exc}"
        self._close(why)

    def _done(self, header: dict[str, Any], size: int) -> None:
        with self._lock:
            pending = self._pending.pop(header.get("id", -1), None)
        if pending is None:
            wire.skip(self.rfd, size)
            return
        if not header.get("ok"):
            wire.skip(self.rfd, size)
            error = dist.DistBackendError(str(header.get("error", "")))
            pending.future.set_exception(error)  # type: ignore[arg-type]
            return
        specs = wire.tensor_specs(header.get("tensors"), "outputs")
        with torch.no_grad():
            for out, s in zip(pending.outputs, specs, strict=True):
                # Hidden from autograd, as gloo's in-place writes are (multi_threaded_pg's note).
                target = out.detach()
                direct = (target.is_contiguous() and str(target.dtype) == f"torch.{s.dtype}"
                          and target.numel() == s.numel)
                buf = target if direct else torch.empty(s.shape, dtype=getattr(torch, s.dtype))
                if s.nbytes:
                    wire.read_into(self.rfd, wire.buffer(buf))
                if not direct:
                    target.copy_(buf.view(out.shape))
        pending.future.set_result(pending.result)

    def _close(self, why: str) -> None:
        with self._lock:
            self.closed = why
            waiters, self._waiters = list(self._waiters.values()), {}
            pending, self._pending = list(self._pending.values()), {}
        self.gone.set()
        for w in waiters:
            w.event.set()
        for p in pending:
            if not p.future.done():
                p.future.set_exception(DriverGone(why))  # type: ignore[arg-type]


def _caller_line() -> int | None:
    frame: Any = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename == SNIPPET_FILE:
            return int(frame.f_lineno)
        frame = frame.f_back
    return None


def _reduce_op(op: Any) -> str:
    if isinstance(op, (AllreduceOptions, AllreduceCoalescedOptions, ReduceOptions,
                       ReduceScatterOptions)):
        op = op.reduceOp
    if isinstance(op, ReduceOp) and op in _REDUCE_OPS:
        return _REDUCE_OPS[op]
    kind = getattr(op, "op", op)
    for known, name in _REDUCE_OPS.items():
        if kind == known:
            return name
    raise ValueError(f"the reduce operation {op} is not supported in exercises")


def _flat(lists: Sequence[Sequence[torch.Tensor]]) -> list[torch.Tensor]:
    return [t for inner in lists for t in inner]


class DriverGroup(dist.ProcessGroup):
    """A process group of the learner process; each operation runs in the driver, on gloo."""

    def __init__(self, link: Link, rank: int, size: int, name: str) -> None:
        super().__init__(rank, size)  # type: ignore[call-arg]
        self._link = link
        self._name = name
        self._rank, self._size = rank, size

    def getBackendName(self) -> str:
        return BACKEND

    # The name the group goes by (torch registers it under this name for C++ callers); OP
    # frames carry it so that the driver knows which of its gloo groups to use.
    def getGroupName(self) -> str:
        return self._name

    def setGroupName(self, name: str) -> None:
        self._name = name

    @property
    def group_name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"DriverGroup(rank={self._rank}, size={self._size}, name={self._name!r})"

    # -- the one path every operation takes
    def _op(self, op: str, inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor],
            result: Sequence[torch.Tensor] | None = None, **fields: Any) -> Any:
        link = self._link
        op_id = link.next_id()
        pending = _Pending(list(outputs), list(outputs if result is None else result))
        header = {"id": op_id, "op": op, "group": self._name, "in": [spec(t) for t in inputs],
                  "out": [spec(t) for t in outputs], "line": _caller_line(), **fields}
        answer = link.request(wire.OP, header, [as_bytes(t) for t in inputs], pending=pending)
        if not answer.get("ok"):
            raise _refusal(answer)
        return _create_work_from_future(pending.future)

    # -- collectives (the names torch.distributed and C++ callers use)
    def allreduce(self, tensors: list[torch.Tensor], opts: Any = None) -> Any:
        return self._op("allreduce", tensors, tensors, reduce_op=_reduce_op(opts or AllreduceOptions()))

    def allreduce_coalesced(self, tensors: list[torch.Tensor], opts: Any = None) -> Any:
        return self._op("allreduce_coalesced", tensors, tensors,
                        reduce_op=_reduce_op(opts or AllreduceCoalescedOptions()))

    def broadcast(self, tensors: list[torch.Tensor], opts: Any = None) -> Any:
        opts = opts or BroadcastOptions()
        return self._op("broadcast", tensors, tensors, root=int(opts.rootRank),
                        root_tensor=int(opts.rootTensor))

    def reduce(self, tensors: list[torch.Tensor], opts: Any = None) -> Any:
        opts = opts or ReduceOptions()
        return self._op("reduce", tensors, tensors, root=int(opts.rootRank),
                        root_tensor=int(opts.rootTensor), reduce_op=_reduce_op(opts))

    def allgather(self, output_tensors: list[list[torch.Tensor]], input_tensors: list[torch.Tensor],
                  opts: Any = None) -> Any:
        return self._op("allgather", input_tensors, _flat(output_tensors),
                        result=_flat(output_tensors))

    def allgather_coalesced(self, output_lists: list[list[torch.Tensor]],
                            input_list: list[torch.Tensor], opts: Any = None) -> Any:
        return self._op("allgather_coalesced", input_list, _flat(output_lists))

    def all_gather_single(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None) -> Any:
        return self._op("all_gather_single", [input], [output])

    _allgather_base = all_gather_single

    def all_gather_single_coalesced(self, outputs: list[torch.Tensor], inputs: list[torch.Tensor],
                                    opts: Any = None) -> Any:
        return self._op("all_gather_single_coalesced", inputs, outputs)

    allgather_into_tensor_coalesced = all_gather_single_coalesced  # type: ignore[assignment]

    def reduce_scatter(self, outputs: list[torch.Tensor], input_lists: list[list[torch.Tensor]],
                       opts: Any = None) -> Any:
        return self._op("reduce_scatter", _flat(input_lists), outputs,
                        reduce_op=_reduce_op(opts or ReduceScatterOptions()))

    def reduce_scatter_single(self, output: torch.Tensor, input: torch.Tensor,
                              opts: Any = None) -> Any:
        return self._op("reduce_scatter_single", [input], [output],
                        reduce_op=_reduce_op(opts or ReduceScatterOptions()))

    _reduce_scatter_base = reduce_scatter_single  # type: ignore[assignment]

    def reduce_scatter_single_coalesced(self, outputs: list[torch.Tensor],
                                        inputs: list[torch.Tensor], opts: Any = None) -> Any:
        return self._op("reduce_scatter_single_coalesced", inputs, outputs,
                        reduce_op=_reduce_op(opts or ReduceScatterOptions()))

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced  # type: ignore[assignment]

    def all_to_all_single(self, output: torch.Tensor, input: torch.Tensor,
                          output_split_sizes: list[int], input_split_sizes: list[int],
                          opts: Any = None) -> Any:
        return self._op("all_to_all_single", [input], [output],
                        out_splits=[int(s) for s in output_split_sizes],
                        in_splits=[int(s) for s in input_split_sizes])

    alltoall_base = all_to_all_single  # type: ignore[assignment]

    def alltoall(self, outputs: list[torch.Tensor], inputs: list[torch.Tensor],
                 opts: Any = None) -> Any:
        return self._op("alltoall", inputs, outputs)

    def gather(self, output_lists: list[list[torch.Tensor]], inputs: list[torch.Tensor],
               opts: Any = None) -> Any:
        opts = opts or GatherOptions()
        return self._op("gather", inputs, _flat(output_lists), root=int(opts.rootRank))

    def scatter(self, outputs: list[torch.Tensor], input_lists: list[list[torch.Tensor]],
                opts: Any = None) -> Any:
        opts = opts or ScatterOptions()
        return self._op("scatter", _flat(input_lists), outputs, root=int(opts.rootRank))

    def barrier(self, opts: Any = None) -> Any:
        return self._op("barrier", [], [])

    def monitored_barrier(self, timeout: Any = None, wait_all_ranks: bool = False) -> None:
        self._op("barrier", [], []).wait()

    def send(self, tensors: list[torch.Tensor], dst: int, tag: int = 0) -> Any:
        return self._op("send", tensors, [], peer=int(dst), tag=int(tag))

    def recv(self, tensors: list[torch.Tensor], src: int, tag: int = 0) -> Any:
        return self._op("recv", [], tensors, peer=int(src), tag=int(tag))

    def recv_anysource(self, tensors: list[torch.Tensor], tag: int = 0) -> Any:
        raise RuntimeError("recv without a source rank is not supported in exercises: name the "
                           "rank you receive from")

    def new_group(self, ranks: list[int], timeout: Any = None, pg_options: Any = None,
                  group_name: str | None = None, group_desc: str | None = None) -> Any:
        """torch calls this on the default group for every new_group (on every rank, or only on
        the members with use_local_synchronization): the driver makes the same group on gloo."""
        link = self._link
        ranks = [int(r) for r in ranks]
        answer = link.request(wire.NEW_GROUP, {"id": link.next_id(), "ranks": ranks,
                                               "name": str(group_name)})
        if not answer.get("ok"):
            raise _refusal(answer)
        if self._rank not in ranks:
            return None
        return DriverGroup(link, ranks.index(self._rank), len(ranks), str(group_name))


def _refusal(answer: dict[str, Any]) -> Exception:
    message = str(answer.get("error", "the driver refused the operation"))
    if answer.get("type") == "ForbiddenCollective":
        from app.verify.engine.forbid import ForbiddenCollective

        return ForbiddenCollective(message)
    return RuntimeError(message)


def install(link: Link, rank: int, world_size: int, timeout_s: float) -> None:
    """Register the backend and make the default group forward to the driver (before any
    learner code runs)."""

    def create(opts: Any, _backend_options: Any) -> DriverGroup:
        return DriverGroup(link, opts.group_rank, opts.group_size, str(opts.group_id))

    dist.Backend.register_backend(BACKEND, create, extended_api=True, devices=["cpu"])
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world_size))
    dist.init_process_group(BACKEND, store=dist.HashStore(), rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=timeout_s))


def default_group() -> str:
    """The name the learner's default group goes by in OP frames."""
    group = dist.distributed_c10d._get_default_group()
    assert isinstance(group, DriverGroup)
    return group._name
