"""The code inside one rank: lock the process down, join the gloo group, install probes, run the snippet.

Runs in a process forked from the run's leader (itself forked from the warm
forkserver), so torch is already imported. Everything the rank learns goes to the
runner as JSON lines on its own event pipe, one write per event, as it happens:
a rank killed half-way still leaves its trace. The snippet's process group is
never used for bookkeeping.

An exercise run (forbid.split finds the checks mark) is not run here: the rank
forks its learner process first, before any gloo socket exists, and then acts as
that learner's driver (driver.py, docs/exercises.md "How a run executes").
"""

from __future__ import annotations

import builtins
import contextlib
import datetime
import faulthandler
import io
import json
import json.encoder
import math
import os
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
import torch.nn.functional

from app.verify.engine import _linux, artifacts, driver, forbid, sandbox
from app.verify.engine.learner import jsonable
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
_ESSENTIAL = frozenset({"report", "artifact", "exception", "snippet_end", "checks_done",
                        "setup_error", "learner_end", "reference_end", "protocol_error",
                        "memory_mark"})
_encode = json.JSONEncoder(separators=(",", ":"), default=str).encode


class Emitter:
    """Writes events to the runner: one JSON object per line, one write() per event."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lock = threading.Lock()
        self._sent = 0
        self._full = False

    def emit(self, kind: str, *, t: int | None = None, **fields: Any) -> None:
        fields["kind"] = kind
        fields["t"] = time.monotonic_ns() if t is None else t
        data = (_encode(fields) + "\n").encode()
        with self._lock:
            if self._full and kind not in _ESSENTIAL:
                return
            if not self._full and self._sent + len(data) > MAX_EVENT_BYTES:
                self._full = True
                self._send(f'{{"kind":"events_truncated","t":{fields["t"]}}}\n'.encode())
                if kind not in _ESSENTIAL:
                    return
            if self._full and self._sent + len(data) > MAX_EVENT_BYTES + RESERVED_EVENT_BYTES:
                return
            self._send(data)

    def _send(self, data: bytes) -> None:
        self._sent += len(data)
        view = memoryview(data)
        while view:
            try:
                n = os.write(self._fd, view)
            except BrokenPipeError:  # the runner is gone: nobody is listening
                os._exit(EXIT_HARNESS_FAILED)
            view = view[n:]


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
    os._exit(status)


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
    code = spec["code"]  # the leader wrote it to SNIPPET_FILE, for tracebacks and inspect
    exercise = forbid.split(code)
    learner = None
    if exercise is not None:
        # First, while this process holds no socket of gloo's and still the privileges that
        # the learner process needs to confine itself (driver.py).
        learner = driver.fork_learner(
            rank=rank, world_size=world_size, limits=limits,
            workdir=os.path.join(workdir, driver.LEARNER_DIR.format(rank=rank)),
            uid=sandbox.learner_uid(leader_pid, rank) if sandbox.active else None)
    if sandbox.active:
        sandbox.confine_rank(leader_pid, int(limits["processes"]))
        # Changing uid cleared the parent-death signal: ask again, and check again.
        _linux.die_with_parent()
        if os.getppid() != leader_pid:
            return EXIT_HARNESS_FAILED
    os.chdir(workdir)
    os.umask(0o077)  # nothing this rank writes is the learner process's to read
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
    params = json.loads(json.dumps(spec["params"]))
    if exercise is not None and learner is not None:
        emit("group_ready")
        status = driver.run_rank(exercise, learner=learner, rank=rank, world_size=world_size,
                                 params=params, emit=emit, store=store, port=port,
                                 workdir=workdir, limits=limits)
        _flush()
        return status
    probes = Probes(emit, store_port=port, trace_buckets=bool(spec.get("trace_buckets", True)))
    probes.install()
    emit("group_ready")

    module = types.ModuleType("__main__")
    module.__dict__.update(
        __file__=SNIPPET_FILE, __builtins__=builtins,
        rank=rank, world_size=world_size, params=params,
        report=_reporter(emit, probes), artifact=_artifact_recorder(emit),
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


def _reporter(emit: Callable[..., None], probes: Probes) -> Callable[[str, Any], None]:
    """The `report` a snippet gets."""

    def report(name: str, value: Any) -> None:
        """Record a measured value for this rank (see the snippet contract)."""
        if not isinstance(name, str) or not name:
            raise TypeError("report(name, value): name must be a non-empty string")
        data = jsonable(value)
        size = len(_encode(data))
        if size > MAX_VALUE_BYTES:
            raise ValueError(f"report({name!r}): value is {size} bytes as JSON; the cap is "
                             f"{MAX_VALUE_BYTES}")
        emit("report", name=name, value=data, iteration=probes.iteration)

    return report


def _artifact_recorder(emit: Callable[..., None]) -> Callable[[str, str, Any], None]:
    """The `artifact` a bank snippet gets: evidence from torch's own tools (a profiler trace,
    a flight-recorder dump, a memory account) under a name, in the run result's `artifacts`."""

    def artifact(name: str, kind: str, source: Any) -> None:
        """Record an artifact for this rank (see app/verify/engine/artifacts.py)."""
        if not isinstance(name, str) or not name:
            raise TypeError("artifact(name, kind, source): name must be a non-empty string")
        data = artifacts.build(kind, source).model_dump(mode="json")
        size = len(_encode(data))
        if size > MAX_VALUE_BYTES:
            raise ValueError(f"artifact({name!r}): {size} bytes as JSON; the cap is {MAX_VALUE_BYTES}")
        emit("artifact", name=name, artifact=data)

    return artifact


# The harness's own stdout and stderr (set up in _rank): flushed through io's own
# method, so a replaced sys.stdout or a patched flush runs nothing at the end.
_streams: list[io.TextIOWrapper] = []
_flush_stream = io.TextIOWrapper.flush


def _flush() -> None:
    for out in _streams:
        with contextlib.suppress(BaseException):
            _flush_stream(out)
