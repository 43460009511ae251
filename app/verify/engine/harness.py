"""The code inside one rank: lock the process down, join the gloo group, install probes, run the snippet.

Runs in a process forked from the run's leader (itself forked from the warm
forkserver), so torch is already imported. Everything the rank learns goes to the
runner as JSON lines on its own event pipe, one write per event, as it happens:
a rank killed half-way still leaves its trace. The snippet's process group is
never used for bookkeeping.

An exercise run (forbid.split finds the checks mark) runs the learner's code and the
exercise's checks program apart (docs/exercises.md, "How a run executes"): the checks
get their own namespace and the real `report`; the learner's `report` only records
values marked as the learner's; the checks run only if the learner's code ended
normally, and `checks_done` is the rank's last event. The harness takes what it needs
after learner code has run (emitter, encoder, Tensor methods) before that code runs,
and puts back what learner code replaced in the namespaces it watches (_Watched).
"""

from __future__ import annotations

import builtins
import contextlib
import datetime
import faulthandler
import functools
import io
import json
import json.encoder
import math
import operator
import os
import posix
import resource
import signal
import sys
import threading
import time
import traceback
import types
from collections.abc import Callable
from typing import Any, NoReturn

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
import torch.nn.functional
from torch.distributed.algorithms.join import Join
from torch.nn.parallel import DistributedDataParallel

from app.verify.engine import _linux, forbid, sandbox
from app.verify.engine.probes import SNIPPET_FILE, Probes

# Beyond these a rank stops sending events and says so once; the runner has its own cap.
MAX_EVENT_BYTES = 8 * 2**20
# One reported value, as JSON.
MAX_VALUE_BYTES = 2**20
MAX_VALUE_ELEMENTS = 100_000
MAX_TRACEBACK_CHARS = 16_000
# At the end, how long to wait for completion callbacks still sending events.
SETTLE_S = 1.0
STACK_FILE = ".stack-{rank}"
_OWN_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
# Exit status of a rank whose harness itself failed (not the snippet).
EXIT_HARNESS_FAILED = 70
# Store keys of the ranks' meeting after init_process_group (_all_connected).
_CONNECTED_KEY = "ddpdrill/connected"
_ALL_CONNECTED_KEY = "ddpdrill/all-connected"
# Past MAX_EVENT_BYTES these events still go out, up to this much more: the checks'
# reports and the end of the run, so a chatty snippet does not lose its verdict.
RESERVED_EVENT_BYTES = 4 * 2**20
_ESSENTIAL = frozenset({"report", "exception", "snippet_end", "checks_start", "checks_done",
                        "setup_error"})
# Where the checks program's frames say they are (it is never written to disk).
CHECKS_FILE = forbid.CHECKS_FILE
_SPEC_FILE = ".spec.json"  # leader.SPEC_FILE: the run's spec, code included

# Taken at import, in the forkserver, before any snippet: learner code that patches
# os, time or json in its rank does not change how events are written.
_write = os.write
_os_exit = os._exit
_monotonic_ns = time.monotonic_ns
_encode = json.JSONEncoder(separators=(",", ":"), default=str).encode
_getpid = os.getpid


class Emitter:
    """Writes events to the runner: one JSON object per line, one write() per event.

    Every event carries `n`, its place in this rank's stream (0, 1, 2, ...): a line
    that something else wrote on the pipe breaks the sequence, which the runner reads
    as tampering in an exercise run. Nothing goes out after `close`.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lock = threading.Lock()
        self._sent = 0
        self._n = 0
        self._full = False
        self._closed = False

    def emit(self, kind: str, *, t: int | None = None, **fields: Any) -> None:
        fields["kind"] = kind
        fields["t"] = _monotonic_ns() if t is None else t
        body = _encode(fields)[:-1]
        with self._lock:
            if self._closed:
                return
            if self._full and kind not in _ESSENTIAL:
                return
            data = f'{body},"n":{self._n}}}\n'.encode()
            if not self._full and self._sent + len(data) > MAX_EVENT_BYTES:
                self._full = True
                marker = f'{{"kind":"events_truncated","t":{fields["t"]},"n":{self._n}}}\n'.encode()
                self._send(marker)
                self._n += 1
                if kind not in _ESSENTIAL:
                    return
                data = f'{body},"n":{self._n}}}\n'.encode()
            if self._full and self._sent + len(data) > MAX_EVENT_BYTES + RESERVED_EVENT_BYTES:
                return
            self._send(data)
            self._n += 1

    def _send(self, data: bytes) -> None:
        self._sent += len(data)
        view = memoryview(data)
        while view:
            try:
                n = _write(self._fd, view)
            except BrokenPipeError:  # the runner is gone: nobody is listening
                _os_exit(EXIT_HARNESS_FAILED)
            view = view[n:]

    def close(self) -> None:
        with self._lock:
            self._closed = True


def jsonable(value: Any, _depth: int = 0) -> Any:
    """A reported value as JSON: tensors become nested lists, non-finite floats strings."""
    if _depth > 32:
        raise ValueError("report(): value is nested too deeply")
    if isinstance(value, _BASE):
        value = _tensor_list(value)
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, complex):
        return [jsonable(value.real), jsonable(value.imag)]
    if isinstance(value, torch.Size):
        return list(value)
    if isinstance(value, (list, tuple)):
        return [jsonable(v, _depth + 1) for v in value]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, (str, int, float, bool)):
                raise TypeError(f"report(): dict keys must be strings or numbers, not {type(k).__name__}")
            out[str(k)] = jsonable(v, _depth + 1)
        return out
    if isinstance(value, (torch.dtype, torch.device)):
        return str(value)
    raise TypeError(
        f"report() takes tensors, numbers, strings, lists and dicts, not {type(value).__name__}")


# torch.Tensor's C base, its methods and the constants _tensor_list needs, taken before any
# snippet runs: torch.Tensor is a Python class a snippet may patch (torch.Tensor.tolist =
# ...), and torch's names may be rebound; the C type's own methods cannot be replaced.
_TENSOR = torch.Tensor
_BASE: Any = torch._C.TensorBase
_NUMEL, _CPU, _DETACH = _BASE.numel, _BASE.cpu, _BASE.detach
_AS_SUBCLASS, _TO_DENSE, _FLOAT, _TOLIST = (_BASE.as_subclass, _BASE.to_dense, _BASE.float,
                                            _BASE.tolist)
_IS_SPARSE, _LAYOUT = _BASE.is_sparse.__get__, _BASE.layout.__get__
_DTYPE, _IS_QUANTIZED = _BASE.dtype.__get__, _BASE.is_quantized.__get__
_STRIDED, _HALVES = torch.strided, (torch.bfloat16, torch.float16)
_NO_SUBCLASS = torch._C.DisableTorchFunctionSubclass


def _tensor_list(value: Any) -> Any:
    """A tensor's values as nested lists, through the C tensor type's own methods (taken at
    start-up): neither a subclass's overrides (__torch_function__, or methods it redefines)
    nor a patch of torch.Tensor decides what is reported."""
    with _NO_SUBCLASS():
        numel = _NUMEL(value)
        if numel > MAX_VALUE_ELEMENTS:
            raise ValueError(f"report(): a tensor of {numel} elements is too large "
                             f"(the cap is {MAX_VALUE_ELEMENTS})")
        value = _CPU(_DETACH(value))
        if type(value) is not _TENSOR:
            value = _AS_SUBCLASS(value, _TENSOR)
        if _IS_SPARSE(value) or _LAYOUT(value) != _STRIDED:
            value = _TO_DENSE(value)
        if _DTYPE(value) in _HALVES or _IS_QUANTIZED(value):
            value = _FLOAT(value)
        return _TOLIST(value)


def _exception_info(exc: BaseException) -> dict[str, Any]:
    """Type, message, the innermost snippet line, and a traceback trimmed to the snippet's frames."""
    line = None
    tb = exc.__traceback__
    frames = traceback.extract_tb(tb)
    first_snippet = next((i for i, f in enumerate(frames) if f.filename == SNIPPET_FILE), None)
    for frame in frames:
        if frame.filename == SNIPPET_FILE:
            line = frame.lineno
    if line is None and isinstance(exc, SyntaxError) and exc.filename == SNIPPET_FILE:
        line = exc.lineno
    cls = type(exc)
    name = cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    try:
        text = "".join(traceback.format_exception(exc))
        if first_snippet is not None:
            # The harness and probes are not the learner's business.
            shown = [f for f in frames[first_snippet:] if not f.filename.startswith(_OWN_DIR)]
            kept = traceback.StackSummary.from_list(shown).format()
            tail = traceback.format_exception_only(exc)
            text = "Traceback (most recent call last):\n" + "".join(kept) + "".join(tail)
    except Exception:  # out of memory while formatting: keep the essentials
        text = f"{name}: {exc}\n"
    return {"type": name, "message": str(exc)[:4000], "line": line,
            "traceback": text[-MAX_TRACEBACK_CHARS:]}


def _exit_status(exc: SystemExit) -> int:
    """The status `sys.exit(code)` gives a Python process."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    print(exc.code, file=sys.stderr)
    return 1


def _lock_down(limits: dict[str, Any]) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    memory = int(limits["memory_bytes"])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    cpu = max(1, math.ceil(float(limits["cpu_seconds"])))
    # SIGXCPU at the soft limit; SIGKILL a second later if the snippet ignores it.
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    # Lowering one's own priority needs no privilege; raising it back is refused.
    os.setpriority(os.PRIO_PROCESS, 0, int(limits.get("nice", 0)))


def _environment(rank: int, world_size: int, port: int, workdir: str) -> dict[str, str]:
    """A scrubbed environment: nothing from the app, only what torchrun would set."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": workdir,
        "TMPDIR": workdir,
        "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": "1",
        "GLOO_SOCKET_IFNAME": "lo",
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "WORLD_SIZE": str(world_size),
        "LOCAL_WORLD_SIZE": str(world_size),
        "GROUP_RANK": "0",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
    }


def rank_main(spec: dict[str, Any], rank: int, fds: tuple[int, int, int], port: int,
              workdir: str, leader_pid: int) -> NoReturn:
    """Entry point of a rank process; never returns."""
    status = EXIT_HARNESS_FAILED
    try:
        _linux.set_name(f"ddp-rank-{rank}")
        status = _rank(spec, rank, fds, port, workdir, leader_pid)
    except BaseException:
        try:
            traceback.print_exc()
            sys.stderr.flush()
        except BaseException:
            pass
    _os_exit(status)


def _all_connected(store: dist.Store, world_size: int) -> None:
    """Return once every rank's init_process_group has returned.

    Gloo's full-mesh connect ends at different moments on the two sides of a pair. A
    rank whose snippet needs no collective could run it and exit, closing its sockets,
    while its peer was still finishing the handshake: the peer then failed in setup with
    "Connection closed by peer" (2 runs in 120, two runs at once, measured). Through
    the leader's store, not gloo's sockets, so no collective and no gloo byte is added
    to what the run measures.
    """
    if store.add(_CONNECTED_KEY, 1) == world_size:
        store.set(_ALL_CONNECTED_KEY, "1")
    store.wait([_ALL_CONNECTED_KEY])


def _rank(spec: dict[str, Any], rank: int, fds: tuple[int, int, int], port: int,
          workdir: str, leader_pid: int) -> int:
    _linux.die_with_parent()
    if os.getppid() != leader_pid:  # the leader died before we could ask
        return EXIT_HARNESS_FAILED
    events_fd, out_fd, err_fd = fds
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    keep = {0, 1, 2, events_fd}
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGUSR1):
        signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
    for stream in ("stdout", "stderr"):
        fd = 1 if stream == "stdout" else 2
        wrapper = io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), encoding="utf-8",
                                   errors="backslashreplace", line_buffering=True)
        setattr(sys, stream, wrapper)
        setattr(sys, f"__{stream}__", wrapper)
        _streams.append(wrapper)
    stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    sys.stdin = stdin
    setattr(sys, "__stdin__", stdin)  # noqa: B010 - typeshed marks it Final

    world_size = int(spec["world_size"])
    limits = spec["limits"]
    if sandbox.active:
        sandbox.confine_rank(leader_pid, int(limits["processes"]))
        # Changing uid cleared the parent-death signal: ask again, and check again.
        _linux.die_with_parent()
        if os.getppid() != leader_pid:
            return EXIT_HARNESS_FAILED
    os.chdir(workdir)
    os.environ.clear()
    os.environ.update(_environment(rank, world_size, port, workdir))
    _lock_down(limits)
    faulthandler.enable(file=sys.stderr)
    stack_file = open(STACK_FILE.format(rank=rank), "w")  # noqa: SIM115 - must outlive this frame
    faulthandler.register(signal.SIGUSR1, file=stack_file, all_threads=True)

    events = Emitter(events_fd)
    emit = events.emit
    emit("started", pid=os.getpid())
    torch.set_num_threads(1)

    code = spec["code"]  # the leader wrote it to SNIPPET_FILE, for tracebacks and inspect
    exercise = forbid.split(code)
    if exercise is not None:
        # While gloo connects: the first look at what the harness watches copies its pages
        # from the forkserver (~2 ms), off the run's path (see _Watched).
        warm = threading.Thread(target=_touch_watched, name="ddpdrill-warm", daemon=True)
        warm.start()
    # The run's timeout is a little longer than the group's, so gloo raises first.
    pg_timeout = datetime.timedelta(seconds=float(limits["pg_timeout_s"]))
    try:
        # The leader hosts the store (as torchrun's agent does), so it outlives any rank.
        store = dist.TCPStore("127.0.0.1", port, world_size, False, pg_timeout)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size,
                                timeout=pg_timeout)
        _all_connected(store, world_size)
    except BaseException as exc:
        emit("setup_error", **_exception_info(exc))
        raise
    probes = Probes(emit, store_port=port, trace_buckets=bool(spec.get("trace_buckets", True)))
    probes.install()
    emit("group_ready")

    params = json.loads(json.dumps(spec["params"]))
    if exercise is not None:
        warm.join()
        learner_code, checks_code, options = exercise
        return _Exercise(events, probes, rank=rank, world_size=world_size, params=params,
                         forbidden=options.get("forbid")).run(learner_code, checks_code)
    module = types.ModuleType("__main__")
    module.__dict__.update(
        __file__=SNIPPET_FILE, __builtins__=builtins,
        rank=rank, world_size=world_size, params=params,
        report=_reporter(emit, probes),
    )
    sys.modules["__main__"] = module
    sys.argv = [SNIPPET_FILE]
    status = 0
    failure: dict[str, Any] | None = None
    emit("snippet_start")
    try:
        exec(compile(code, SNIPPET_FILE, "exec", dont_inherit=True), module.__dict__)
    except SystemExit as exc:
        status = _exit_status(exc)
        if status:
            failure = {**_exception_info(exc), "exit_code": status}
    except BaseException as exc:
        status = 1
        failure = _exception_info(exc)
        with contextlib.suppress(BaseException):
            sys.stderr.write(failure["traceback"])
    if failure is None:
        probes.wait_pending()
    probes.settle(SETTLE_S)
    if failure is None:
        emit("snippet_end", sent_total=probes.sockets.total())
    else:
        emit("exception", **failure, sent_total=probes.sockets.total())
    _flush()
    # os._exit, not interpreter shutdown: DDP still holding the group at exit
    # sometimes aborts ("terminate called without an active exception").
    return status


def _reporter(emit: Callable[..., None], probes: Probes, source: str | None = None,
              before: Callable[[], None] | None = None) -> Callable[[str, Any], None]:
    """The `report` a snippet (source None), learner code ("learner") or the checks get."""
    extra = {} if source is None else {"source": source}

    def report(name: str, value: Any) -> None:
        """Record a measured value for this rank (see the snippet contract)."""
        if before is not None:
            before()
        if not isinstance(name, str) or not name:
            raise TypeError("report(name, value): name must be a non-empty string")
        data = jsonable(value)
        size = len(_encode(data))
        if size > MAX_VALUE_BYTES:
            raise ValueError(f"report({name!r}): value is {size} bytes as JSON; the cap is "
                             f"{MAX_VALUE_BYTES}")
        emit("report", name=name, value=data, iteration=probes.iteration, **extra)

    return report


# The harness's own stdout and stderr (set up in _rank): flushed through io's own
# method, so a replaced sys.stdout or a patched flush runs nothing at the end.
_streams: list[io.TextIOWrapper] = []
_flush_stream = io.TextIOWrapper.flush


def _flush() -> None:
    for out in _streams:
        with contextlib.suppress(BaseException):
            _flush_stream(out)


class _EarlyExit(BaseException):
    """os._exit called by learner code in an exercise run: the checks must not be skipped."""

    def __init__(self, status: int) -> None:
        super().__init__(f"os._exit({status})")
        self.status = status


def _refuse_exits() -> None:
    """From now on os._exit raises _EarlyExit in this rank (a process it forks still exits).
    The harness itself ends the rank with the original (_os_exit)."""
    me = _getpid()

    def _exit(status: int) -> NoReturn:
        if _getpid() != me:
            _os_exit(status)
        raise _EarlyExit(status)

    os._exit = posix._exit = _exit


_MISSING = object()


def _static_namespaces() -> list[tuple[str, Any]]:
    """What the checks and the harness read by name, and the probes leave alone."""
    return [
        ("builtins", builtins), ("torch", torch), ("torch.Tensor", torch.Tensor),
        ("torch.nn.functional", torch.nn.functional), ("torch.nn.Module", torch.nn.Module),
        ("json", json), ("json.encoder", json.encoder), ("json.JSONEncoder", json.JSONEncoder),
        ("os", os), ("math", math), ("time", time), ("sys", sys),
        ("the harness", sys.modules[__name__]), ("the exercise rules", forbid),
    ]


def _probed_namespaces() -> list[tuple[str, Any]]:
    """What the checks read by name and the probes patch in each rank (Probes.install)."""
    return [
        ("torch.autograd", torch.autograd), ("torch.distributed", dist),
        ("torch.distributed.distributed_c10d", c10d),
        ("DistributedDataParallel", DistributedDataParallel), ("Join", Join),
    ]


# The namespaces report() and jsonable() read.
_REPORTING = frozenset({"builtins", "torch.Tensor", "json", "json.encoder", "json.JSONEncoder",
                        "math", "the harness"})
# The harness's own replacement of os._exit (_refuse_exits) is not learner code's.
_UNWATCHED = frozenset({("os", "_exit")})
_Snapshot = tuple[str, Any, tuple[str, ...], tuple[Any, ...], Callable[[Any], Any]]


def _snapshot(namespaces: list[tuple[str, Any]]) -> list[_Snapshot]:
    snaps = []
    for label, obj in namespaces:
        items = [(k, v) for k, v in vars(obj).items()
                 if callable(v) and (label, k) not in _UNWATCHED]
        if not items:
            continue
        names, values = tuple(k for k, _ in items), tuple(v for _, v in items)
        getter: Callable[[Any], Any] = (operator.itemgetter(*names) if len(names) > 1
                                        else functools.partial(_one, names[0]))
        snaps.append((label, obj, names, values, getter))
    return snaps


def _one(name: str, namespace: Any) -> tuple[Any]:
    return (namespace[name],)


def _touch_watched() -> None:
    for snap in _STATIC:
        _unchanged(snap)
    for _label, obj in _probed_namespaces():
        for value in list(vars(obj).values()):
            callable(value)


def _unchanged(snap: _Snapshot) -> bool:
    """Every watched name still holds its original, compared by identity: `==` would ask
    the replacement, which may say it is equal."""
    _label, obj, _names, values, getter = snap
    try:
        return all(map(operator.is_, getter(vars(obj)), values))
    except KeyError:  # a name was deleted
        return False


class _Watched:
    """The callables of some modules and classes as they were before learner code ran.

    `changes` puts back every one that learner code replaced or deleted, and says which.
    Only callables: module state that torch itself rebinds at run time is not touched,
    and neither are names learner code adds to a module (importing a submodule adds one);
    a name added to a watched class that hides its base's is taken away. Most of the
    snapshot is taken once in the forkserver (_STATIC): taken in a rank, touching some
    thousand objects' reference counts copies their pages (2.5 ms or more, measured).
    """

    def __init__(self, only: frozenset[str] | None = None) -> None:
        # The rank's own set-up changed a few since the forkserver's snapshot (gloo's
        # init_process_group installs sys.excepthook): those namespaces are taken again.
        self._snaps = [snap if _unchanged(snap) else _snapshot([(snap[0], snap[1])])[0]
                       for snap in _STATIC if only is None or snap[0] in only]
        if only is None:
            self._snaps += _snapshot(_probed_namespaces())
        self._classes = [(label, obj, keys) for label, obj, keys in _STATIC_CLASSES
                         if only is None or label in only]

    def changes(self) -> list[str]:
        changed: list[str] = []
        for snap in self._snaps:
            if _unchanged(snap):
                continue
            label, obj, names, values, _getter = snap
            now = vars(obj)
            for name, value in zip(names, values, strict=True):
                if now.get(name, _MISSING) is not value:
                    changed.append(f"{label}.{name}")
                    if isinstance(obj, type):
                        type.__setattr__(obj, name, value)
                    else:
                        obj.__dict__[name] = value
        for label, cls, keys in self._classes:
            # A name added to the class that hides its base's (torch.Tensor.tolist = ... hides
            # the C type's tolist): taken away again, so the base's answers.
            now = vars(cls)
            if len(now) == len(keys):
                continue
            for name in [k for k in now if k not in keys]:
                if any(name in vars(base) for base in cls.__mro__[1:]):
                    type.__delattr__(cls, name)
                    changed.append(f"{label}.{name}")
        return changed


class _Exercise:
    """One rank of an exercise run: the learner's code, then (if it ended normally) the checks."""

    def __init__(self, events: Emitter, probes: Probes, *, rank: int, world_size: int,
                 params: dict[str, Any], forbidden: Any) -> None:
        self.events = events
        self.emit = events.emit
        self.probes = probes
        self.rank, self.world_size, self.params = rank, world_size, params
        self.checks_ns: dict[str, Any] | None = None
        self.harness_names: dict[str, Any] = {}
        self.noted: set[str] = set()
        names = [n for n in forbidden if isinstance(n, str)] if isinstance(forbidden, list) else []
        # The rules as configured, and the callback, kept here: learner code can reach the
        # module's copies, and restore() checks them.
        self.after_call = self.restore
        forbid.configure(names, after_call=self.after_call)
        self.rules = forbid._forbidden
        self.rules_changed = False
        _refuse_exits()  # before the snapshot: the refusal is the harness's, not a patch
        self.watched = _Watched()
        # What report() itself goes through: checked again before each report, since code
        # learner code left behind (a hook, a thread) may run while the checks do.
        self.reporting = _Watched(only=_REPORTING)

    def restore(self, *, reporting: bool = False, strict: bool = True) -> None:
        """Put back what learner code replaced (only what report() reads, for `reporting`);
        note it once per name. A change to the exercise's rules is put back too, and (if
        `strict`) raises RulesChanged: calls made while they were off cannot be undone."""
        changed = (self.reporting if reporting else self.watched).changes()
        if forbid._forbidden is not self.rules or forbid._after_call is not self.after_call:
            forbid._forbidden, forbid._after_call = self.rules, self.after_call
            changed.append("the exercise's rules")
            self.rules_changed = True
        if sys.gettrace() is not None or sys.getprofile() is not None:
            sys.settrace(None)
            sys.setprofile(None)
            changed.append("the trace function")
        ns = self.checks_ns
        if ns is not None:
            for name, value in self.harness_names.items():
                if ns.get(name, _MISSING) is not value:
                    ns[name] = value
                    changed.append(f"the checks' {name}")
        fresh = [c for c in changed if c not in self.noted]
        if fresh:
            self.noted.update(fresh)
            self.emit("note", text=f"your code replaced {', '.join(fresh)}: the checks used "
                                   "the original")
        if strict and self.rules_changed:
            raise forbid.RulesChanged(forbid.RULES_CHANGED)

    def run(self, learner_code: str, checks_code: str) -> int:
        emit, probes = self.emit, self.probes
        learner = types.ModuleType("__main__")
        learner.__dict__.update(
            __file__=SNIPPET_FILE, __builtins__=builtins, rank=self.rank,
            world_size=self.world_size, params=json.loads(json.dumps(self.params)),
            report=_reporter(emit, probes, "learner"))
        sys.modules["__main__"] = learner
        sys.argv = [SNIPPET_FILE]
        _hide_checks(learner_code)
        emit("snippet_start", checks=True)
        try:
            with forbid.learner():
                exec(compile(learner_code, SNIPPET_FILE, "exec", dont_inherit=True),
                     learner.__dict__)
        except BaseException as exc:
            return self._ended(exc, "learner")
        try:
            self.restore()
        except forbid.RulesChanged as exc:
            return self._ended(exc, "learner")
        self.harness_names = {
            "report": _reporter(emit, probes, "checks",
                                before=functools.partial(self.restore, reporting=True)),
            "rank": self.rank, "world_size": self.world_size,
            "params": json.loads(json.dumps(self.params)),
            "learner_calls": forbid.learner_calls}
        ns = _checks_namespace(learner.__dict__)
        ns.update(self.harness_names)
        self.checks_ns = ns
        emit("checks_start")
        try:
            exec(compile(checks_code, CHECKS_FILE, "exec", dont_inherit=True), ns)
        except BaseException as exc:
            return self._ended(exc, "checks")
        probes.wait_pending()
        probes.settle(SETTLE_S)
        emit("snippet_end", sent_total=probes.sockets.total())
        emit("checks_done")
        self.events.close()
        _flush()
        return 0

    def _ended(self, exc: BaseException, phase: str) -> int:
        """The learner's code (or the checks) did not run to the end: no checks_done."""
        self.restore(strict=False)
        failure = _exception_info(exc)
        if isinstance(exc, _EarlyExit):
            failure.update(type="SystemExit", message=str(exc), exit_code=exc.status & 0xFF)
        elif isinstance(exc, SystemExit):
            failure.update(message=f"sys.exit({exc.code!r})", exit_code=_exit_status(exc))
        with contextlib.suppress(BaseException):
            sys.stderr.write(failure["traceback"])
        self.probes.settle(SETTLE_S)
        self.emit("exception", **failure, phase=phase, sent_total=self.probes.sockets.total())
        _flush()
        return 1


def _hide_checks(learner_code: str) -> None:
    """Leave on disk only what the learner wrote: the leader wrote the whole run's text to
    SNIPPET_FILE and the spec (with it) for the spare ranks, all of which have read it by now
    (every rank has passed _all_connected). Each rank does it before its own learner code runs."""
    with contextlib.suppress(OSError):
        os.unlink(_SPEC_FILE)
    tmp = f".{SNIPPET_FILE}.{_getpid()}"
    with contextlib.suppress(OSError):
        with open(tmp, "w") as f:
            f.write(learner_code)
        os.replace(tmp, SNIPPET_FILE)


def _learner_defined(value: Any) -> bool:
    code = getattr(value, "__code__", None)
    return isinstance(code, types.CodeType) and code.co_filename == SNIPPET_FILE


def _checks_namespace(learner: dict[str, Any]) -> dict[str, Any]:
    """The checks' namespace: the names learner code defined, its functions and classes guarded."""
    ns: dict[str, Any] = {"__name__": "__checks__", "__file__": CHECKS_FILE,
                          "__builtins__": builtins}
    for name, value in learner.items():
        if name.startswith("__") and name.endswith("__"):
            continue
        if isinstance(value, types.FunctionType) and _learner_defined(value):
            value = forbid.guard(value)
        elif isinstance(value, type) and value.__module__ == "__main__":
            _guard_class(value)
        ns[name] = value
    return ns


def _guard_class(cls: type) -> None:
    """Guard, in place, the methods a learner-defined class defines itself."""
    for name, attr in list(vars(cls).items()):
        if isinstance(attr, staticmethod | classmethod) and _learner_defined(attr.__func__):
            type.__setattr__(cls, name, type(attr)(forbid.guard(attr.__func__)))
        elif isinstance(attr, types.FunctionType) and _learner_defined(attr):
            type.__setattr__(cls, name, forbid.guard(attr))


# Last, once every name above exists: taken in the forkserver, before any rank forks.
_STATIC = _snapshot(_static_namespaces())
# The watched classes' own names, to tell a name added later from theirs.
_STATIC_CLASSES = [(label, obj, frozenset(vars(obj))) for label, obj in _static_namespaces()
                   if isinstance(obj, type)]
