"""The collectives probe: every torch.distributed entry point, wrapped to record its start and end.

Each wrapper calls the original with the same arguments and only adds events
around it: `collective_start` before, `collective_end` when the call returns (or,
for async work, when the work completes).
"""

from __future__ import annotations

import functools
import inspect
import sys
import threading
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from app.verify.engine.probes.core import Recorder, error_text, now, signature_of

# Every torch.distributed entry point a snippet (or DDP's Python code) can use
# to talk to peers.
COLLECTIVES = (
    "all_reduce", "all_reduce_coalesced", "reduce", "broadcast", "all_gather",
    "all_gather_into_tensor", "all_gather_coalesced", "all_gather_object", "gather",
    "gather_object", "scatter", "scatter_object_list", "broadcast_object_list",
    "reduce_scatter", "reduce_scatter_tensor", "all_to_all", "all_to_all_single",
    "barrier", "monitored_barrier", "send", "recv", "isend", "irecv", "send_object_list",
    "recv_object_list", "batch_isend_irecv", "new_group",
    # torch 2.13's names for all_gather_into_tensor and reduce_scatter_tensor (FSDP2 calls them).
    "all_gather_single", "reduce_scatter_single",
    # DDP's constructor and buffer sync go through these two C++ bindings.
    "_broadcast_coalesced", "_verify_params_across_processes",
)
# What this module patches or reads in torch (tests/verify/engine/test_torch_surface.py checks
# each exists on the pinned torch, so an upgrade that moves one fails there, loudly).
TORCH_ATTRIBUTES = (
    *(f"torch.distributed.{name}" for name in COLLECTIVES),
    # (the two C++ bindings have no alias there)
    *(f"torch.distributed.distributed_c10d.{name}" for name in COLLECTIVES if not name.startswith("_")),
    "torch.distributed.ProcessGroup",
    "torch.distributed.ProcessGroup.size",
    "torch.distributed.get_world_size",
    "torch.distributed.get_process_group_ranks",
    "torch.distributed.distributed_c10d._get_default_group",
    "torch.distributed.Work.get_future",
    "torch.distributed.Work.wait",
    "torch.futures.Future.add_done_callback",
    "torch.futures.Future.wait",
)
# Names recorded under the older name of the same operation, so that one check counts both.
CANONICAL = {"all_gather_single": "all_gather_into_tensor", "reduce_scatter_single": "reduce_scatter_tensor"}
_ALWAYS_ASYNC = frozenset({"isend", "irecv", "batch_isend_irecv"})
# Which argument carries this rank's payload, in order of preference.
_PAYLOAD_ARGS = (
    "tensor", "input_tensor", "input", "input_tensor_list", "input_list", "tensor_list",
    "tensors", "scatter_list", "p2p_op_list",
)
_PEER_ARGS = ("dst", "src", "group_dst", "group_src")


def install(rec: Recorder) -> None:
    """Replace each entry point of torch.distributed (and its c10d alias) by its probe."""
    for name in COLLECTIVES:
        original = getattr(dist, name, None)
        if original is None or getattr(original, "__ddpdrill_probe__", False):
            continue
        wrapped = wrap(rec, name, original)
        setattr(dist, name, wrapped)
        if getattr(c10d, name, None) is original:
            setattr(c10d, name, wrapped)


def precompute() -> None:
    """Work out every entry point's signature in this process (the forkserver, before forking)."""
    for name in COLLECTIVES:
        original = getattr(dist, name, None)
        if original is not None and not getattr(original, "__ddpdrill_probe__", False):
            signature_of(original)


def wrap(rec: Recorder, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """The probe of one torch.distributed function: what every call of `name` goes through."""
    sig = signature_of(original)
    op = CANONICAL.get(name, name)

    @functools.wraps(original)
    def probe(*args: Any, **kwargs: Any) -> Any:
        if getattr(rec.tls, "inside", False):
            return original(*args, **kwargs)
        start = now()
        info, is_async = describe(name, sig, args, kwargs)
        if op != name:
            info["api"] = name
        return record(rec, op, info, is_async, sys._getframe(1), start, original, args, kwargs)

    probe.__ddpdrill_probe__ = True  # type: ignore[attr-defined]
    return probe


def record(rec: Recorder, op: str, info: dict[str, Any], is_async: bool, frame: Any, start: int,
           call: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
           works: Callable[[Any], list[Any]] | None = None) -> Any:
    """Make one collective call, recorded: the single entry of every collective probe.

    `collective_start` first, then the call with further recording suppressed,
    then `collective_end` when it returns, or for async work (`works(result)`
    gives it) when the work completes.
    """
    seq = rec.next_seq()
    info.update(rec.where(frame))
    sent0 = rec.sockets.total()
    rec.emit("collective_start", t=start, op=op, seq=seq, iteration=rec.iteration, **info)
    rec.tls.inside = True
    try:
        result = call(*args, **kwargs)
    except BaseException as exc:
        end(rec, op, seq, sent0, error=error_text(exc))
        raise
    finally:
        rec.tls.inside = False
        if op == "new_group":  # a new group opens new gloo sockets
            rec.sockets.invalidate()
    if is_async and result is not None:
        finish_async(rec, op, seq, sent0, works(result) if works is not None else result)
    else:
        end(rec, op, seq, sent0)
    return result


def payload(obj: Any) -> tuple[list[int] | None, str | None, int | None, int | None]:
    """(shape, dtype, bytes, count) of a tensor, a list of tensors or a list of P2POps."""
    if isinstance(obj, torch.Tensor):
        return list(obj.shape), str(obj.dtype).removeprefix("torch."), obj.numel() * obj.element_size(), None
    if isinstance(obj, (list, tuple)) and obj:
        tensors: list[Any] = [getattr(t, "tensor", t) for t in obj]
        if all(isinstance(t, torch.Tensor) for t in tensors):
            first = tensors[0]
            nbytes = sum(t.numel() * t.element_size() for t in tensors)
            return list(first.shape), str(first.dtype).removeprefix("torch."), nbytes, len(tensors)
    return None, None, None, None


def describe(name: str, sig: inspect.Signature | None, args: tuple[Any, ...],
             kwargs: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The fields of `collective_start` for one call, and whether it is async."""
    info: dict[str, Any] = {}
    bound: dict[str, Any] = {}
    if sig is not None:
        try:
            ba = sig.bind(*args, **kwargs)
            ba.apply_defaults()
            bound = dict(ba.arguments)
        except TypeError:
            bound = {}
    group = bound.get("group")
    data = next((bound[k] for k in _PAYLOAD_ARGS if bound.get(k) is not None), None)
    if sig is None:  # C++ bindings: (process_group, tensors, ...)
        group = next((a for a in args if isinstance(a, dist.ProcessGroup)), None)
        data = next((a for a in args if isinstance(a, (torch.Tensor, list, tuple))), None)
    shape, dtype, nbytes, count = payload(data)
    info.update(group_fields(group))
    info.update(shape=shape, dtype=dtype, bytes=nbytes)
    if count is not None:
        info["count"] = count
    for key in _PEER_ARGS:
        if isinstance(bound.get(key), int) and not isinstance(bound[key], bool):
            info["peer"] = bound[key]
            break
    op = bound.get("op")
    if op is not None:
        info["reduce_op"] = str(getattr(op, "name", op)).rsplit(".", 1)[-1]
    is_async = name in _ALWAYS_ASYNC or bool(bound.get("async_op", False))
    if is_async:
        info["async"] = True
    return info, is_async


def group_fields(group: Any) -> dict[str, Any]:
    """`group_size`, and `group_ranks` (global ranks) for a group other than the default one."""
    try:
        size = group.size() if isinstance(group, dist.ProcessGroup) else dist.get_world_size(group)
        if size < 0:  # this rank is not in the group (torch returns -1)
            return {"group_size": None}
        fields: dict[str, Any] = {"group_size": size}
        if group is not None and group is not c10d._get_default_group():
            fields["group_ranks"] = dist.get_process_group_ranks(group)
        return fields
    except Exception:  # a destroyed or foreign group
        return {"group_size": None}


def end(rec: Recorder, op: str, seq: int, sent0: int, **extra: Any) -> None:
    """`collective_end` of call `seq`, with the bytes this rank sent since it started."""
    t = now()
    sent = rec.sockets.total()
    rec.emit("collective_end", t=t, op=op, seq=seq, bytes_sent=max(0, sent - sent0),
             sent_total=sent, **extra)


def finish_async(rec: Recorder, op: str, seq: int, sent0: int, result: Any) -> None:
    """End call `seq` when all of its works complete (or at once, if gloo gives no future)."""
    works = result if isinstance(result, list) else [result]
    if not works:  # an op that returns no work (monitored_barrier_) is done when it returns
        end(rec, op, seq, sent0)
        return
    futures = []
    for work in works:
        try:
            futures.append(work.get_future())
        except Exception:  # gloo's send/recv works have no future
            futures = []
            break
    if not futures:
        end(rec, op, seq, sent0, enqueued_only=True)
        return
    remaining = [len(futures)]
    lock = threading.Lock()
    for work in works:
        rec.pending[id(work)] = work

    def done(fut: Any) -> None:
        error = None
        try:
            fut.wait()
        except Exception as exc:
            error = error_text(exc)
        with lock:
            remaining[0] -= 1
            last = remaining[0] == 0
        if last:
            for work in works:
                rec.pending.pop(id(work), None)
            end(rec, op, seq, sent0, error=error)

    for fut in futures:
        rec.on_completion(fut, done)
