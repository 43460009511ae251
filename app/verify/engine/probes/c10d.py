"""The dispatcher probe: every collective that reaches c10d, whichever API issued it.

torch.distributed's Python functions are wrapped by the collectives probe, but
much of torch talks to peers without them: DTensor and tensor parallelism issue
functional collectives (`torch.ops._c10d_functional.*`, C++ all the way down),
FSDP2 calls the `*_single` functions and ProcessGroup methods, and code can call
`torch.ops.c10d.*` itself. All of these end in one of the `c10d::*` dispatcher
ops (`allreduce_`, `_allgather_base_`, `_reduce_scatter_base_`, `alltoall_base_`,
...), which ProcessGroup's C++ methods dispatch to before the gloo backend runs.

A Python kernel registered on each of them at the BackendSelect key (the one key
that every call passes: a functional collective's inner call runs with the
autograd keys excluded, and so does inference mode) records the call and
redispatches past itself, so the gloo kernel runs exactly as before. Calls made
inside a recorded torch.distributed function or a bucket reduction are not
recorded again (`Recorder.tls.inside`), so each logical collective is one event;
nor are DDP's reducer's own calls (its gradient all-reduce, which the bucket
records describe, the broadcast of rebuilt bucket sizes, the all-reduce of the
used-parameter map): see `DdpProbes.internal`.
The op is named as torch.distributed names the same operation (`allreduce_` is
`all_reduce`); `api` says which c10d op it was. The event ends when the work
completes (the functional API returns before it has), or at once where gloo gives
the work no future (send and recv).
"""

from __future__ import annotations

import sys
from typing import Any

import torch
import torch.distributed as dist

from app.verify.engine.probes import collectives
from app.verify.engine.probes.core import Recorder, now

# c10d op -> (torch.distributed name, the argument holding this rank's payload, the peer argument).
OPS: dict[str, tuple[str, str | None, str | None]] = {
    "allreduce_": ("all_reduce", "tensors", None),
    "allreduce_coalesced_": ("all_reduce_coalesced", "tensors", None),
    "_allgather_base_": ("all_gather_into_tensor", "input_tensor", None),
    "allgather_into_tensor_coalesced_": ("all_gather_into_tensor", "inputs", None),
    "allgather_": ("all_gather", "input_tensors", None),
    "allgather_coalesced_": ("all_gather_coalesced", "input_list", None),
    "_reduce_scatter_base_": ("reduce_scatter_tensor", "input_tensor", None),
    "reduce_scatter_tensor_coalesced_": ("reduce_scatter_tensor", "inputs", None),
    "reduce_scatter_": ("reduce_scatter", "input_tensors", None),
    "alltoall_base_": ("all_to_all_single", "input", None),
    "alltoall_": ("all_to_all", "input_tensors", None),
    "broadcast_": ("broadcast", "tensors", "root_rank"),
    "reduce_": ("reduce", "tensors", "root_rank"),
    "gather_": ("gather", "input_tensors", "root_rank"),
    "scatter_": ("scatter", "output_tensors", "root_rank"),
    "barrier": ("barrier", None, None),
    "monitored_barrier_": ("monitored_barrier", None, None),
    "send": ("send", "tensors", "dst"),
    "recv_": ("recv", "tensors", "src"),
    "recv_any_source_": ("recv", "tensors", None),
}
# The backend's own methods (`pg._get_backend(device).allreduce(...)`) run gloo without the
# dispatcher: each is wrapped in Python (learner code is the only Python caller; c10d's
# C++ calls the backend directly and is seen at the dispatcher).
BACKEND_METHODS: dict[str, str] = {
    "broadcast": "broadcast", "allreduce": "all_reduce", "allreduce_coalesced": "all_reduce_coalesced",
    "reduce": "reduce", "allgather": "all_gather", "_allgather_base": "all_gather_into_tensor",
    "allgather_coalesced": "all_gather_coalesced", "gather": "gather", "scatter": "scatter",
    "reduce_scatter": "reduce_scatter", "_reduce_scatter_base": "reduce_scatter_tensor",
    "alltoall_base": "all_to_all_single", "alltoall": "all_to_all", "send": "send", "recv": "recv",
    "recv_anysource": "recv", "barrier": "barrier", "monitored_barrier": "monitored_barrier",
}
TORCH_ATTRIBUTES = (
    *(f"torch.ops.c10d.{name}.default" for name in OPS),
    *(f"torch._C._distributed_c10d.Backend.{name}" for name in BACKEND_METHODS),
    "torch.library.Library",
    "torch._C.DispatchKey.BackendSelect",
    "torch._C.DispatchKeySet.remove",
    "torch._ops.OpOverload.redispatch",
    "torch.distributed.ProcessGroup.unbox",
    "torch.distributed.Work.unbox",
)
_BACKEND_SELECT = torch._C.DispatchKey.BackendSelect


# The rank's recorder once its probes are installed; until then the kernels only pass calls on.
_recorder: Recorder | None = None
_library: Any = None


def register() -> None:
    """Register the kernels in this process (once; the forkserver does it before forking, so
    that the dispatcher's bookkeeping is not repeated in every rank)."""
    global _library
    if _library is not None:
        return
    lib = torch.library.Library("c10d", "IMPL")
    for name in OPS:
        op = getattr(torch.ops.c10d, name).default
        lib.impl(name, _kernel(name, op), "BackendSelect", with_keyset=True)
    _library = lib


_originals: dict[str, Any] = {}


def install(rec: Recorder) -> None:
    """Start recording the calls that reach c10d into `rec`, and the backend's own methods."""
    global _recorder
    register()
    _recorder = rec
    backend = torch._C._distributed_c10d.Backend
    for name, dist_name in BACKEND_METHODS.items():
        original = _originals.get(name, vars(backend).get(name))
        if original is not None:
            _originals[name] = original
            setattr(backend, name, _backend_probe(rec, name, dist_name, original))


def uninstall() -> None:
    """Stop recording (the kernels stay registered and pass every call on)."""
    global _recorder
    _recorder = None
    backend = torch._C._distributed_c10d.Backend
    for name, original in _originals.items():
        setattr(backend, name, original)


def _backend_probe(rec: Recorder, name: str, dist_name: str, original: Any) -> Any:
    api = f"Backend.{name}"

    def probe(self: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(rec.tls, "inside", False):
            return original(self, *args, **kwargs)
        start = now()
        data = next((a for a in (*args, *kwargs.values())
                     if isinstance(a, (torch.Tensor, list, tuple))), None)
        shape, dtype, nbytes, count = collectives.payload(_flat(data))
        try:
            size: int | None = int(self.size())
        except Exception:
            size = None
        info: dict[str, Any] = {"group_size": size, "shape": shape, "dtype": dtype, "bytes": nbytes,
                                "api": api, "async": True}
        if count is not None:
            info["count"] = count
        return collectives.record(rec, dist_name, info, True, sys._getframe(1), start,
                                  original, (self, *args), kwargs)

    probe.__ddpdrill_probe__ = True  # type: ignore[attr-defined]
    return probe


def _kernel(name: str, op: Any) -> Any:
    dist_name, payload_arg, peer_arg = OPS[name]
    names = [a.name for a in op._schema.arguments]
    api = f"c10d.{name}"

    def ddpdrill_c10d_probe(keyset: Any, *args: Any, **kwargs: Any) -> Any:
        below = keyset.remove(_BACKEND_SELECT)
        rec = _recorder
        if rec is None or getattr(rec.tls, "inside", False):
            return op.redispatch(below, *args, **kwargs)
        start = now()
        bound = dict(zip(names, args, strict=False))
        bound.update(kwargs)
        frame = sys._getframe(1)
        if rec.ddp_internal(frame, bound.get("process_group")):
            return op.redispatch(below, *args, **kwargs)
        info = _describe(bound, payload_arg, peer_arg)
        info["api"] = api
        return collectives.record(rec, dist_name, info, True, frame, start,
                                  op.redispatch, (below, *args), kwargs, works=_works)

    return ddpdrill_c10d_probe


def _flat(value: Any) -> Any:
    """A list of tensor lists (allgather_'s outputs) as one list."""
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], (list, tuple)):
        return [t for inner in value for t in inner]
    return value


def _describe(bound: dict[str, Any], payload_arg: str | None, peer_arg: str | None) -> dict[str, Any]:
    info: dict[str, Any] = {}
    shape, dtype, nbytes, count = collectives.payload(_flat(bound.get(payload_arg)) if payload_arg else None)
    try:
        group = dist.ProcessGroup.unbox(bound["process_group"])
    except Exception:
        group = None
    info.update(collectives.group_fields(group) if group is not None else {"group_size": None})
    info.update(shape=shape, dtype=dtype, bytes=nbytes)
    if count is not None:
        info["count"] = count
    peer = bound.get(peer_arg) if peer_arg is not None else None
    if isinstance(peer, int) and not isinstance(peer, bool):
        info["peer"] = peer
    info["async"] = True
    return info


def _works(result: Any) -> list[Any]:
    """The Work objects a c10d op returned: alone, or after its output tensors."""
    items = result if isinstance(result, tuple) else (result,)
    works = []
    for item in items:
        if isinstance(item, torch.ScriptObject):
            try:
                works.append(dist.Work.unbox(item))
            except Exception:  # not a Work
                continue
    return works
