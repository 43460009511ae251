"""The DDP probe: forward, backward, gradient readiness, bucket reductions and Join, as events.

Every probe calls the original and only adds timestamps around it; the one
place where a probe stands in for torch is the gradient-bucket reduction, where
DDP's built-in reducer has no Python seam. There the probe registers a comm hook
that reproduces the built-in path exactly (same divisor, same
multiply-or-divide, same all-reduce on DDP's process group), so gradients are
bit-for-bit what torch computes without it, and an author's own comm hook runs
unchanged inside the probe.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.algorithms.join import Join
from torch.nn.parallel import DistributedDataParallel as DDP

from app.verify.engine.probes.core import Recorder, error_text, now, passes_along

# What this module patches or reads in torch, on the classes (tests/verify/engine/test_torch_surface.py
# checks each exists on the pinned torch).
TORCH_ATTRIBUTES = (
    "torch.nn.parallel.DistributedDataParallel.__init__",
    "torch.nn.parallel.DistributedDataParallel.forward",
    "torch.nn.parallel.DistributedDataParallel.register_comm_hook",
    "torch.nn.parallel.DistributedDataParallel._register_builtin_comm_hook",
    "torch.nn.parallel.DistributedDataParallel._match_all_reduce_for_bwd_pass",
    "torch.nn.parallel.DistributedDataParallel._check_comm_hook",
    "torch.distributed.algorithms.join.Join.notify_join_context",
    "torch.distributed.algorithms.join.Join.__exit__",
    "torch.autograd.backward",
    "torch.autograd.Variable._execution_engine",
    "torch.Tensor.register_post_accumulate_grad_hook",
    "torch.Tensor.untyped_storage",
    "torch.distributed._register_comm_hook",
    "torch.distributed.GradBucket.index",
    "torch.distributed.GradBucket.parameters",
    "torch.distributed.GradBucket.buffer",
    "torch.distributed.GradBucket.gradients",
    "torch.distributed.ProcessGroup.allreduce",
    "torch.distributed.ProcessGroup.group_name",
    "torch.distributed.ProcessGroup.unbox",
    "torch.autograd.graph._engine_run_backward",
)
# Attributes DDP and Join set on their instances, read by this module (checked on real
# instances by the same test).
DDP_INSTANCE_ATTRIBUTES = (
    "reducer", "module", "process_group", "bucket_bytes_cap", "require_backward_grad_sync",
    "find_unused_parameters", "gradient_as_bucket_view", "static_graph", "logger", "_comm_hooks",
)
# Set on the DDP instance once a Join over it exists (its join hook), and on the Join.
DDP_JOIN_ATTRIBUTES = ("_divide_by_initial_world_size",)
JOIN_INSTANCE_ATTRIBUTES = ("_enable",)
_DDP_FILE = os.path.join("torch", "nn", "parallel", "distributed.py")
# How torch words an exception raised inside a Future.then() callback.
_CALLBACK_ERROR = "Got the following error when running the callback"


@dataclass
class _DdpState:
    """What the probes know about one DDP instance."""

    index: int
    names: dict[int, str]
    iteration: int = 0
    sync: bool = True
    hooked: bool = False
    builtin_hook: bool = False
    inner_hook: Callable[..., Any] | None = None
    inner_state: Any = None
    fwd_work: Any = None
    fwd_static: bool = True
    shadow: bool = False
    shadow_steps: int = 0
    grad_storage: dict[int, int] = field(default_factory=dict)
    # A DDP forward with grad enabled happened and its backward has not ended:
    # gradients accumulated outside that (the bare module used directly) are not DDP's.
    awaiting_backward: bool = False
    backward_pending: bool = False

    group: str = ""  # the name of DDP's process group

    def name_of(self, param: torch.Tensor) -> str:
        return self.names.get(param.data_ptr(), "?")


class DdpProbes:
    """Patches DDP and Join (once per rank) and holds what is known about each DDP instance."""

    def __init__(self, rec: Recorder, *, trace_buckets: bool = True) -> None:
        self.rec = rec
        self.trace_buckets = trace_buckets
        self._ddps: list[_DdpState] = []
        self._bucket_error: BaseException | None = None
        rec.ddp_internal = self.internal

    def internal(self, frame: Any, group: Any) -> bool:
        """Whether a call reaching c10d is DDP's reducer talking for itself.

        Those calls are the reducer's gradient all-reduce (without the bucket probe),
        the broadcast of rebuilt bucket sizes in the second iteration, and the
        all-reduce of the used-parameter map under find_unused_parameters: C++,
        reached from DDP's own Python code or, during a DDP backward on DDP's group,
        straight from the autograd engine. They are not collective events, as before
        the dispatcher probe existed (their bytes are in bytes_sent).
        """
        if not self._ddps:
            return False
        while frame is not None and passes_along(frame.f_code):
            frame = frame.f_back
        if frame is None:
            return False
        code = frame.f_code
        if code.co_filename.endswith(_DDP_FILE):
            return True
        if code.co_name != "_engine_run_backward":
            return False
        pending = {st.group for st in self._ddps if st.awaiting_backward}
        if not pending:
            return False
        try:
            return dist.ProcessGroup.unbox(group).group_name in pending
        except Exception:
            return False

    def _state(self, ddp: Any) -> _DdpState | None:
        return ddp.__dict__.get("_ddpdrill_state")

    def install(self) -> None:
        probes = self
        rec = self.rec
        orig_init = DDP.__init__
        orig_forward = DDP.forward
        orig_register = DDP.register_comm_hook
        orig_builtin = DDP._register_builtin_comm_hook
        orig_match = DDP._match_all_reduce_for_bwd_pass
        orig_notify = Join.notify_join_context
        orig_exit = Join.__exit__
        orig_backward = torch.autograd.backward

        @functools.wraps(orig_init)
        def __init__(self: DDP, *args: Any, **kwargs: Any) -> None:
            orig_init(self, *args, **kwargs)
            probes._on_ddp_init(self)

        @functools.wraps(orig_forward)
        def forward(self: DDP, *args: Any, **kwargs: Any) -> Any:
            st = probes._state(self)
            if st is None:
                return orig_forward(self, *args, **kwargs)
            training = torch.is_grad_enabled()
            if training and not st.hooked and not st.builtin_hook and probes.trace_buckets:
                probes._install_bucket_probe(self, st)
            if training:
                st.iteration += 1
                st.sync = bool(self.require_backward_grad_sync)
                st.awaiting_backward = True
            rec.iteration = st.iteration
            rec.emit("ddp_forward_start", ddp=st.index, iteration=st.iteration,
                     sync=st.sync if training else False, grad=training)
            try:
                out = orig_forward(self, *args, **kwargs)
            except BaseException as exc:
                rec.emit("ddp_forward_end", ddp=st.index, iteration=st.iteration,
                         error=error_text(exc))
                raise
            rec.emit("ddp_forward_end", ddp=st.index, iteration=st.iteration)
            return out

        @functools.wraps(orig_register)
        def register_comm_hook(self: DDP, state: object, hook: Callable[..., Any]) -> None:
            st = probes._state(self)
            if st is None or not probes.trace_buckets or st.inner_hook is not None or st.builtin_hook:
                # Untraced, or a second registration: torch decides (and refuses a second one).
                return orig_register(self, state, hook)
            self._check_comm_hook(hook)
            if self.logger is not None:
                self.logger._set_comm_hook_name(hook.__qualname__)
            self._comm_hooks.append((hook, state))
            st.inner_hook, st.inner_state = hook, state
            if not st.hooked:
                probes._install_bucket_probe(self, st)
            return None

        @functools.wraps(orig_builtin)
        def _register_builtin_comm_hook(self: DDP, comm_hook_type: Any) -> None:
            st = probes._state(self)
            if st is not None and not st.hooked:
                st.builtin_hook = True
                rec.emit("note", ddp=st.index,
                         text="a built-in C++ comm hook is registered: no bucket timings")
            return orig_builtin(self, comm_hook_type)

        @functools.wraps(orig_match)
        def _match_all_reduce_for_bwd_pass(self: DDP) -> None:
            st = probes._state(self)
            if st is None:
                return orig_match(self)
            st.shadow = True
            st.shadow_steps += 1
            try:
                return orig_match(self)
            finally:
                st.shadow = False

        def notify_join_context(joinable: Any) -> Any:
            work = orig_notify(joinable)
            st = probes._state(joinable) if isinstance(joinable, DDP) else None
            if st is not None and work is not None:
                st.fwd_work = work
                st.fwd_static = bool(joinable._divide_by_initial_world_size)
            return work

        @functools.wraps(orig_exit)
        def __exit__(self: Join, exc_type: Any, value: Any, tb: Any) -> Any:
            if exc_type is not None or not self._enable:
                return orig_exit(self, exc_type, value, tb)
            rec.emit("join_start", iteration=rec.iteration)
            try:
                result = orig_exit(self, exc_type, value, tb)
            except BaseException as exc:
                rec.emit("join_end", iteration=rec.iteration, error=error_text(exc))
                raise
            rec.emit("join_end", iteration=rec.iteration)
            return result

        @functools.wraps(orig_backward)
        def backward(*args: Any, **kwargs: Any) -> Any:
            probes._bucket_error = None
            try:
                return orig_backward(*args, **kwargs)
            except RuntimeError as exc:
                original = probes._bucket_error
                probes._bucket_error = None
                if original is not None and str(exc).startswith(_CALLBACK_ERROR):
                    raise original from None
                raise

        torch.autograd.backward = backward
        DDP.__init__ = __init__  # type: ignore[method-assign]
        DDP.forward = forward  # type: ignore[method-assign]
        DDP.register_comm_hook = register_comm_hook  # type: ignore[method-assign]
        DDP._register_builtin_comm_hook = _register_builtin_comm_hook  # type: ignore[method-assign]
        DDP._match_all_reduce_for_bwd_pass = _match_all_reduce_for_bwd_pass  # type: ignore[method-assign]
        Join.notify_join_context = staticmethod(notify_join_context)  # type: ignore[method-assign]
        Join.__exit__ = __exit__  # type: ignore[method-assign]

    def _on_ddp_init(self, ddp: DDP) -> None:
        named = [(n, p) for n, p in ddp.module.named_parameters() if p.requires_grad]
        st = _DdpState(index=len(self._ddps), names={p.data_ptr(): n for n, p in named},
                       group=str(getattr(ddp.process_group, "group_name", "")))
        self._ddps.append(st)
        ddp.__dict__["_ddpdrill_state"] = st
        for name, param in named:
            param.register_post_accumulate_grad_hook(
                functools.partial(self._on_grad_ready, st, name))
        self.rec.emit("ddp_init", ddp=st.index, params=len(named),
                      bucket_cap_mb=getattr(ddp, "bucket_bytes_cap", 0) / 2**20,
                      find_unused_parameters=bool(ddp.find_unused_parameters),
                      gradient_as_bucket_view=bool(ddp.gradient_as_bucket_view),
                      static_graph=bool(ddp.static_graph))

    def _on_grad_ready(self, st: _DdpState, name: str, param: torch.Tensor) -> None:
        if not st.awaiting_backward:
            return
        t = now()
        grad = param.grad
        if grad is not None:
            st.grad_storage[param.data_ptr()] = grad.untyped_storage().data_ptr()
        self.rec.emit("grad_ready", t=t, ddp=st.index, param=name, iteration=st.iteration)
        if not st.backward_pending:
            st.backward_pending = True
            engine = torch.autograd.Variable._execution_engine

            def backward_end() -> None:
                st.backward_pending = st.awaiting_backward = False
                self.rec.emit("ddp_backward_end", ddp=st.index, iteration=st.iteration, sync=st.sync)

            # Queued from a final callback, so it runs after DDP's own finalize
            # callback (queued later in this backward) has waited for all buckets.
            engine.queue_callback(lambda: engine.queue_callback(backward_end))

    def _install_bucket_probe(self, ddp: DDP, st: _DdpState) -> None:
        if getattr(ddp, "reducer", None) is None:
            return
        st.hooked = True
        dist._register_comm_hook(ddp.reducer, None, self._bucket_probe(ddp, st))

    def _bucket_probe(self, ddp: DDP, st: _DdpState) -> Callable[..., Any]:
        probes = self
        rec = self.rec

        def ddpdrill_bucket_probe(_state: object, bucket: dist.GradBucket) -> Any:
            t = now()
            shadow = st.shadow
            params = bucket.parameters()
            buffer = bucket.buffer()
            hook = st.inner_hook
            seq = rec.next_seq()
            iteration = st.iteration + st.shadow_steps if shadow else st.iteration
            sent0 = rec.sockets.total()
            rec.emit("bucket_reduce_start", t=t, seq=seq, ddp=st.index, index=bucket.index(),
                     iteration=iteration, params=[st.name_of(p) for p in params],
                     bytes=buffer.numel() * buffer.element_size(), shadow=shadow,
                     hook="built-in allreduce" if hook is None else hook.__qualname__,
                     group_size=ddp.process_group.size(),
                     **rec.where(sys._getframe(1)))

            def done(f: Any) -> None:
                error = None
                try:
                    f.wait()
                except Exception as exc:
                    error = error_text(exc)
                probes._bucket_end(seq, st, sent0, error=error)

            try:
                if hook is None:
                    fut = probes._builtin_allreduce(ddp, st, bucket, params, shadow, done)
                else:
                    fut = hook(st.inner_state, bucket)
                    if hasattr(fut, "add_done_callback"):
                        rec.on_completion(fut, done)
            except BaseException as exc:
                probes._bucket_end(seq, st, sent0, error=error_text(exc))
                raise
            return fut

        return ddpdrill_bucket_probe

    def _bucket_end(self, seq: int, st: _DdpState, sent0: int, error: str | None = None) -> None:
        t = now()
        sent = self.rec.sockets.total()
        self.rec.emit("bucket_reduce_end", t=t, seq=seq, ddp=st.index,
                      bytes_sent=max(0, sent - sent0), sent_total=sent, error=error)

    def _builtin_allreduce(self, ddp: DDP, st: _DdpState, bucket: dist.GradBucket,
                           params: list[torch.Tensor], shadow: bool,
                           on_done: Callable[[Any], None]) -> Any:
        """What DDP's reducer does when no comm hook is registered (reducer.cpp), step for step.

        `on_done` sees the all-reduce finish before DDP does.
        """
        buffer = bucket.buffer()
        if not shadow:  # a joined rank's shadow buckets hold zeros and are not divided
            div = self._divide_factor(ddp, st)
            storage = buffer.untyped_storage().data_ptr()
            # The reducer divides a gradient that already lives in the bucket
            # (div_), and multiplies by 1/div while copying one that does not.
            aliased = [st.grad_storage.get(p.data_ptr()) == storage for p in params]
            if all(aliased):
                buffer.div_(div)
            elif not any(aliased):
                buffer.mul_(1.0 / div)
            else:
                for view, alias in zip(bucket.gradients(), aliased, strict=True):
                    if alias:
                        view.div_(div)
                    else:
                        view.mul_(1.0 / div)
        # The bucket record is this all-reduce's event: the dispatcher probe must not add another.
        self.rec.tls.inside = True
        try:
            reduced = ddp.process_group.allreduce([buffer]).get_future()
        finally:
            self.rec.tls.inside = False
        probes = self

        def unwrap(f: Any) -> torch.Tensor:
            try:
                return f.value()[0]
            except Exception as exc:
                # torch prefixes an error raised in a then-callback; the
                # backward() probe re-raises this original, as the reducer would.
                probes._bucket_error = exc
                raise

        self.rec.on_completion(reduced, on_done)
        return reduced.then(unwrap)

    def _divide_factor(self, ddp: DDP, st: _DdpState) -> int:
        work = st.fwd_work
        if work is not None and not st.fwd_static:
            # Under Join(divide_by_initial_world_size=False) the forward pass
            # counted the ranks still active; the reducer divides by that.
            work.wait()
            value = work.get_future().value()
            count = value[0] if isinstance(value, (list, tuple)) else value
            return int(count.item())
        return int(ddp.process_group.size())
