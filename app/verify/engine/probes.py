"""Probes installed inside a rank: they record what torch.distributed and DDP do without changing it.

Runs only in rank processes (it imports torch). Every probe calls the original
function and only adds timestamps around it; the one place where a probe stands
in for torch is the gradient-bucket reduction, where DDP's built-in reducer has
no Python seam. There the probe registers a comm hook that reproduces the
built-in path exactly (same divisor, same multiply-or-divide, same all-reduce on
DDP's process group), so gradients are bit-for-bit what torch computes without
it, and an author's own comm hook runs unchanged inside the probe.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import os
import socket
import stat
import struct
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
from torch.distributed.algorithms.join import Join
from torch.nn.parallel import DistributedDataParallel as DDP

from app.verify.engine import forbid

SNIPPET_FILE = "snippet.py"

Emit = Callable[..., None]

# Every torch.distributed entry point a snippet (or DDP's Python code) can use
# to talk to peers. Names missing from this torch build are skipped.
COLLECTIVES = (
    "all_reduce", "all_reduce_coalesced", "reduce", "broadcast", "all_gather",
    "all_gather_into_tensor", "all_gather_coalesced", "all_gather_object", "gather",
    "gather_object", "scatter", "scatter_object_list", "broadcast_object_list",
    "reduce_scatter", "reduce_scatter_tensor", "all_to_all", "all_to_all_single",
    "barrier", "monitored_barrier", "send", "recv", "isend", "irecv", "send_object_list",
    "recv_object_list", "batch_isend_irecv", "new_group",
    # DDP's constructor and buffer sync go through these two C++ bindings.
    "_broadcast_coalesced", "_verify_params_across_processes",
)
_ALWAYS_ASYNC = frozenset({"isend", "irecv", "batch_isend_irecv"})
# Which argument carries this rank's payload, in order of preference.
_PAYLOAD_ARGS = (
    "tensor", "input_tensor", "input", "input_tensor_list", "input_list", "tensor_list",
    "tensors", "scatter_list", "p2p_op_list",
)
_PEER_ARGS = ("dst", "src", "group_dst", "group_src")
_ERROR_CHARS = 2000
# How torch words an exception raised inside a Future.then() callback.
_CALLBACK_ERROR = "Got the following error when running the callback"

# struct tcp_info: tcpi_bytes_sent and tcpi_bytes_retrans are u64s at offsets 200 and 208
# (Linux 4.19+). Sent counts a retransmitted segment again; loopback drops packets when
# many runs share it, so the retransmitted bytes are taken off.
_TCPI_BYTES_SENT = 200
_TCPI_BYTES_RETRANS = 208
_TCP_INFO_LEN = 232


def _now() -> int:
    return time.monotonic_ns()


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:_ERROR_CHARS]


class GlooSockets:
    """Bytes this rank has sent on TCP sockets other than the rendezvous store's (gloo's pairs).

    Reads the kernel's per-socket counter (TCP_INFO) on the live file descriptors
    without duplicating them: holding a duplicate would keep a socket open after
    gloo closes it and hide a peer's disappearance. The descriptor table is
    rescanned at most every RESCAN_S (gloo opens sockets only when a group forms),
    so a tight loop of collectives pays tens of microseconds per reading.
    """

    RESCAN_S = 0.05

    def __init__(self, store_port: int) -> None:
        self._store_port = store_port
        self._gloo: dict[int, int] = {}  # fd -> inode
        self._scanned_at = -1.0
        self._lock = threading.Lock()

    def total(self) -> int:
        with self._lock:
            if time.monotonic() - self._scanned_at > self.RESCAN_S:
                self._rescan()
            total = 0
            for fd, ino in list(self._gloo.items()):
                sent = self._bytes_sent(fd, ino)
                if sent is None:
                    del self._gloo[fd]
                    self._scanned_at = -1.0
                else:
                    total += sent
            return total

    def invalidate(self) -> None:
        with self._lock:
            self._scanned_at = -1.0

    def _rescan(self) -> None:
        self._scanned_at = time.monotonic()
        try:
            names = os.listdir("/proc/self/fd")
        except OSError:
            return
        found: dict[int, int] = {}
        for name in names:
            fd = int(name)
            try:
                st = os.fstat(fd)
            except OSError:
                continue
            if not stat.S_ISSOCK(st.st_mode):
                continue
            if self._gloo.get(fd) == st.st_ino or self._is_gloo(fd):
                found[fd] = st.st_ino
        self._gloo = found

    def _is_gloo(self, fd: int) -> bool:
        try:
            sock = socket.socket(fileno=fd)
        except OSError:
            return False
        try:
            if sock.family not in (socket.AF_INET, socket.AF_INET6) or sock.type != socket.SOCK_STREAM:
                return False
            local, peer = sock.getsockname()[1], sock.getpeername()[1]
        except OSError:  # listening or not connected
            return False
        finally:
            sock.detach()
        return self._store_port not in (local, peer)

    @staticmethod
    def _bytes_sent(fd: int, ino: int) -> int | None:
        """The data bytes the socket has sent once (tcpi_bytes_sent less tcpi_bytes_retrans),
        or None if `fd` no longer is that socket."""
        try:
            if os.fstat(fd).st_ino != ino:
                return None
            sock = socket.socket(fileno=fd)
        except OSError:
            return None
        try:
            info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_LEN)
        except OSError:
            return None
        finally:
            sock.detach()
        if len(info) < _TCPI_BYTES_RETRANS + 8:
            return 0
        sent, retrans = struct.unpack_from("QQ", info, _TCPI_BYTES_SENT)
        return int(sent - retrans)


def _payload(obj: Any) -> tuple[list[int] | None, str | None, int | None, int | None]:
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

    def name_of(self, param: torch.Tensor) -> str:
        return self.names.get(param.data_ptr(), "?")


class Probes:
    """Installs the probes in this rank and holds their state."""

    def __init__(self, emit: Emit, *, store_port: int, trace_buckets: bool = True) -> None:
        self.emit = emit
        self.sockets = GlooSockets(store_port)
        self.trace_buckets = trace_buckets
        self.iteration: int | None = None
        self._seq = itertools.count(1)
        self._seq_lock = threading.Lock()
        self._tls = threading.local()
        self._pending: dict[int, Any] = {}
        self._ddps: list[_DdpState] = []
        self._bucket_error: BaseException | None = None
        self._inflight = 0
        self._inflight_cv = threading.Condition()

    def next_seq(self) -> int:
        with self._seq_lock:
            return next(self._seq)

    # ----------------------------------------------------------------- install
    def install(self) -> None:
        for name in COLLECTIVES:
            original = getattr(dist, name, None)
            if original is None or getattr(original, "__ddpdrill_probe__", False):
                continue
            wrapped = self._wrap_collective(name, original)
            setattr(dist, name, wrapped)
            if getattr(c10d, name, None) is original:
                setattr(c10d, name, wrapped)
        self._patch_ddp()

    def _wrap_collective(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        try:
            sig: inspect.Signature | None = inspect.signature(original)
        except (TypeError, ValueError):
            sig = None
        probes = self

        @functools.wraps(original)
        def probe(*args: Any, **kwargs: Any) -> Any:
            if getattr(probes._tls, "inside", False):
                return original(*args, **kwargs)
            start = _now()
            info, is_async = probes._describe(name, sig, args, kwargs)
            seq = probes.next_seq()
            info.update(probes._where(sys._getframe(1)))
            sent0 = probes.sockets.total()
            probes.emit("collective_start", t=start, op=name, seq=seq, iteration=probes.iteration,
                        **info)
            probes._tls.inside = True
            try:
                forbid.check(name)  # an exercise's forbidden collective raises, recorded
                result = original(*args, **kwargs)
            except BaseException as exc:
                probes._end(name, seq, sent0, error=_error_text(exc))
                raise
            finally:
                probes._tls.inside = False
                if name == "new_group":  # a new group opens new gloo sockets
                    probes.sockets.invalidate()
            if is_async and result is not None:
                probes._finish_async(name, seq, sent0, result)
            else:
                probes._end(name, seq, sent0)
            return result

        probe.__ddpdrill_probe__ = True  # type: ignore[attr-defined]
        return probe

    def _describe(self, name: str, sig: inspect.Signature | None, args: tuple[Any, ...],
                  kwargs: dict[str, Any]) -> tuple[dict[str, Any], bool]:
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
        payload = next((bound[k] for k in _PAYLOAD_ARGS if bound.get(k) is not None), None)
        if sig is None:  # C++ bindings: (process_group, tensors, ...)
            group = next((a for a in args if isinstance(a, dist.ProcessGroup)), None)
            payload = next((a for a in args if isinstance(a, (torch.Tensor, list, tuple))), None)
        shape, dtype, nbytes, count = _payload(payload)
        try:
            info["group_size"] = (group.size() if isinstance(group, dist.ProcessGroup)
                                  else dist.get_world_size(group))
        except Exception:  # a destroyed or foreign group
            info["group_size"] = None
        info.update(shape=shape, dtype=dtype, bytes=nbytes)
        if count is not None:
            info["count"] = count
        for key in _PEER_ARGS:
            if isinstance(bound.get(key), int):
                info["peer"] = bound[key]
                break
        op = bound.get("op")
        if op is not None:
            info["reduce_op"] = str(getattr(op, "name", op)).rsplit(".", 1)[-1]
        is_async = name in _ALWAYS_ASYNC or bool(bound.get("async_op", False))
        if is_async:
            info["async"] = True
        return info, is_async

    def _where(self, frame: Any) -> dict[str, Any]:
        """Who called: the snippet directly, or torch code (named) on behalf of a snippet line."""
        where: dict[str, Any] = {"source": "snippet", "line": None}
        first = True
        while frame is not None:
            if frame.f_code.co_filename == SNIPPET_FILE:
                where["line"] = frame.f_lineno
                break
            if first:
                where["source"] = "torch"
                where["caller"] = frame.f_code.co_name
            first = False
            frame = frame.f_back
        return where

    def _end(self, op: str, seq: int, sent0: int, **extra: Any) -> None:
        t = _now()
        sent = self.sockets.total()
        self.emit("collective_end", t=t, op=op, seq=seq, bytes_sent=max(0, sent - sent0),
                  sent_total=sent, **extra)

    def _finish_async(self, op: str, seq: int, sent0: int, result: Any) -> None:
        works = result if isinstance(result, list) else [result]
        futures = []
        for work in works:
            try:
                futures.append(work.get_future())
            except Exception:  # gloo's send/recv works have no future
                futures = []
                break
        if not futures:
            self._end(op, seq, sent0, enqueued_only=True)
            return
        remaining = [len(futures)]
        lock = threading.Lock()
        for work in works:
            self._pending[id(work)] = work

        def done(fut: Any) -> None:
            error = None
            try:
                fut.wait()
            except Exception as exc:
                error = _error_text(exc)
            with lock:
                remaining[0] -= 1
                last = remaining[0] == 0
            if last:
                for work in works:
                    self._pending.pop(id(work), None)
                self._end(op, seq, sent0, error=error)

        for fut in futures:
            self._on_completion(fut, done)

    def _on_completion(self, fut: Any, callback: Callable[[Any], None]) -> None:
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
        for work in list(self._pending.values()):
            with contextlib.suppress(Exception):
                work.wait()

    def settle(self, timeout_s: float) -> None:
        """Wait (a little) for completion callbacks still sending their events."""
        with self._inflight_cv:
            self._inflight_cv.wait_for(lambda: self._inflight == 0, timeout_s)

    # --------------------------------------------------------------------- DDP
    def _state(self, ddp: Any) -> _DdpState | None:
        return ddp.__dict__.get("_ddpdrill_state")

    def _patch_ddp(self) -> None:
        probes = self
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
            probes.iteration = st.iteration
            probes.emit("ddp_forward_start", ddp=st.index, iteration=st.iteration,
                        sync=st.sync if training else False, grad=training)
            try:
                out = orig_forward(self, *args, **kwargs)
            except BaseException as exc:
                probes.emit("ddp_forward_end", ddp=st.index, iteration=st.iteration,
                            error=_error_text(exc))
                raise
            probes.emit("ddp_forward_end", ddp=st.index, iteration=st.iteration)
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
                probes.emit("note", ddp=st.index,
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
            probes.emit("join_start", iteration=probes.iteration)
            try:
                result = orig_exit(self, exc_type, value, tb)
            except BaseException as exc:
                probes.emit("join_end", iteration=probes.iteration, error=_error_text(exc))
                raise
            probes.emit("join_end", iteration=probes.iteration)
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
        st = _DdpState(index=len(self._ddps), names={p.data_ptr(): n for n, p in named})
        self._ddps.append(st)
        ddp.__dict__["_ddpdrill_state"] = st
        for name, param in named:
            param.register_post_accumulate_grad_hook(
                functools.partial(self._on_grad_ready, st, name))
        self.emit("ddp_init", ddp=st.index, params=len(named),
                  bucket_cap_mb=getattr(ddp, "bucket_bytes_cap", 0) / 2**20,
                  find_unused_parameters=bool(ddp.find_unused_parameters),
                  gradient_as_bucket_view=bool(ddp.gradient_as_bucket_view),
                  static_graph=bool(ddp.static_graph))

    def _on_grad_ready(self, st: _DdpState, name: str, param: torch.Tensor) -> None:
        if not st.awaiting_backward:
            return
        t = _now()
        grad = param.grad
        if grad is not None:
            st.grad_storage[param.data_ptr()] = grad.untyped_storage().data_ptr()
        self.emit("grad_ready", t=t, ddp=st.index, param=name, iteration=st.iteration)
        if not st.backward_pending:
            st.backward_pending = True
            engine = torch.autograd.Variable._execution_engine

            def backward_end() -> None:
                st.backward_pending = st.awaiting_backward = False
                self.emit("ddp_backward_end", ddp=st.index, iteration=st.iteration, sync=st.sync)

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

        def ddpdrill_bucket_probe(_state: object, bucket: dist.GradBucket) -> Any:
            t = _now()
            shadow = st.shadow
            params = bucket.parameters()
            buffer = bucket.buffer()
            hook = st.inner_hook
            seq = probes.next_seq()
            iteration = st.iteration + st.shadow_steps if shadow else st.iteration
            sent0 = probes.sockets.total()
            probes.emit("bucket_reduce_start", t=t, seq=seq, ddp=st.index, index=bucket.index(),
                        iteration=iteration, params=[st.name_of(p) for p in params],
                        bytes=buffer.numel() * buffer.element_size(), shadow=shadow,
                        hook="built-in allreduce" if hook is None else hook.__qualname__,
                        group_size=ddp.process_group.size(),
                        **probes._where(sys._getframe(1)))
            def done(f: Any) -> None:
                error = None
                try:
                    f.wait()
                except Exception as exc:
                    error = _error_text(exc)
                probes._bucket_end(seq, st, sent0, error=error)

            try:
                if hook is None:
                    fut = probes._builtin_allreduce(ddp, st, bucket, params, shadow, done)
                else:
                    fut = hook(st.inner_state, bucket)
                    if hasattr(fut, "add_done_callback"):
                        probes._on_completion(fut, done)
            except BaseException as exc:
                probes._bucket_end(seq, st, sent0, error=_error_text(exc))
                raise
            return fut

        return ddpdrill_bucket_probe

    def _bucket_end(self, seq: int, st: _DdpState, sent0: int, error: str | None = None) -> None:
        t = _now()
        sent = self.sockets.total()
        self.emit("bucket_reduce_end", t=t, seq=seq, ddp=st.index, bytes_sent=max(0, sent - sent0),
                  sent_total=sent, error=error)

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
        reduced = ddp.process_group.allreduce([buffer]).get_future()
        probes = self

        def unwrap(f: Any) -> torch.Tensor:
            try:
                return f.value()[0]
            except Exception as exc:
                # torch prefixes an error raised in a then-callback; the
                # backward() probe re-raises this original, as the reducer would.
                probes._bucket_error = exc
                raise

        self._on_completion(reduced, on_done)
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
