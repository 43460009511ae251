"""What every probe shares: the emitter, sequence numbers, who called, and completion tracking.

No torch here. The other probe modules record through one `Recorder`, so a
collective, a bucket reduction and a pipeline stage draw their `seq` from one
counter and a rank's `settle()` waits for all of their callbacks.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from app.verify.engine.forbid import SNIPPET_FILE
from app.verify.engine.probes.sockets import GlooSockets

Emit = Callable[..., None]

_ERROR_CHARS = 2000

# Torch files whose functions only hand a collective on (see Recorder.where), as path tails.
_PLUMBING = tuple(os.path.join("torch", *p.split("/")) for p in (
    "_ops.py", "_library/autograd.py", "distributed/distributed_c10d.py", "distributed/c10d_logger.py",
    "distributed/_functional_collectives.py", "distributed/_functional_collectives_impl.py",
    "utils/_contextlib.py", "_dynamo/eval_frame.py", "distributed/tensor/placement_types.py",
    "distributed/fsdp/_fully_shard/_fsdp_common.py",
))
_TORCH_DISTRIBUTED = os.path.join("torch", "distributed", "")
_FSDP_GROUP = os.path.join("torch", "distributed", "fsdp", "_fully_shard", "_fsdp_param_group.py")
_OWN_DIR = os.path.dirname(os.path.abspath(__file__))


@functools.lru_cache(maxsize=4096)
def _passes_along_file(filename: str, name: str) -> bool:
    return (filename.endswith(_PLUMBING) or filename.startswith(_OWN_DIR)
            # FSDP's collective objects (DefaultAllGather.__call__ and the like)
            or (name == "__call__" and _TORCH_DISTRIBUTED in filename))


def passes_along(code: Any) -> bool:
    """Whether a frame running `code` only hands a collective on (see Recorder.where)."""
    return _passes_along_file(code.co_filename, code.co_name)


def now() -> int:
    return time.monotonic_ns()


def error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:_ERROR_CHARS]


class Recorder:
    """The state the probes of one rank share."""

    def __init__(self, emit: Emit, *, store_port: int) -> None:
        self.emit = emit
        self.sockets = GlooSockets(store_port)
        # The rank's current DDP iteration (None before the first DDP forward).
        self.iteration: int | None = None
        # `inside` is set while a recorded call runs: what it calls in turn is not recorded again.
        self.tls = threading.local()
        self.pending: dict[int, Any] = {}
        self._seq = itertools.count(1)
        self._seq_lock = threading.Lock()
        self._inflight = 0
        self._inflight_cv = threading.Condition()
        # Whether a c10d call (its Python frame, its process group) is DDP's own bookkeeping;
        # the DDP probe answers once it is installed.
        self.ddp_internal: Callable[[Any, Any], bool] = lambda frame, group: False

    def next_seq(self) -> int:
        with self._seq_lock:
            return next(self._seq)

    def where(self, frame: Any) -> dict[str, Any]:
        """Who called: the snippet directly, or torch code (named) on behalf of a snippet line.

        Frames that only pass a call along (torch.distributed's own functions, the op
        dispatcher, decorators) are skipped: the caller is the first frame that
        decided to communicate, e.g. FSDP's `foreach_all_gather` or DTensor's
        `redistribute_local_tensor`. Under FSDP, `unit` names the module whose
        parameters the collective moves.
        """
        where: dict[str, Any] = {"source": "snippet", "line": None}
        first = True
        while frame is not None:
            code = frame.f_code
            if code.co_filename == SNIPPET_FILE:
                where["line"] = frame.f_lineno
                break
            if first and not passes_along(code):
                where["source"] = "torch"
                where["caller"] = code.co_name
                first = False
            if "unit" not in where and code.co_filename.endswith(_FSDP_GROUP):
                fqn = getattr(frame.f_locals.get("self"), "_module_fqn", None)
                if isinstance(fqn, str):
                    where["unit"] = fqn or "(root)"
            frame = frame.f_back
        return where

    def on_completion(self, fut: Any, callback: Callable[[Any], None]) -> None:
        """Run `callback` when `fut` completes, counted so that settle() can wait for it.

        A future wakes its waiters before it runs its callbacks: without the
        count, a rank could exit before the callback has sent its event.
        """
        with self._inflight_cv:
            self._inflight += 1

        def counted(f: Any) -> None:
            try:
                callback(f)
            finally:
                with self._inflight_cv:
                    self._inflight -= 1
                    self._inflight_cv.notify_all()

        fut.add_done_callback(counted)

    def wait_pending(self) -> None:
        """Let async collectives still in flight finish, as destroying the process group would."""
        for work in list(self.pending.values()):
            with contextlib.suppress(Exception):
                work.wait()

    def settle(self, timeout_s: float) -> None:
        """Wait (a little) for completion callbacks still sending their events."""
        with self._inflight_cv:
            self._inflight_cv.wait_for(lambda: self._inflight == 0, timeout_s)


# Signatures by function object: the forkserver works out those the probes need before
# forking (collectives.precompute, pipeline.precompute), so that no rank pays for
# `inspect.signature` through torch's wrappers.
_SIGNATURES: dict[Any, inspect.Signature | None] = {}


def signature_of(fn: Any) -> inspect.Signature | None:
    """`inspect.signature(fn)`, remembered; None for a callable that has none."""
    if fn not in _SIGNATURES:
        try:
            _SIGNATURES[fn] = inspect.signature(fn)
        except (TypeError, ValueError):
            _SIGNATURES[fn] = None
    return _SIGNATURES[fn]
