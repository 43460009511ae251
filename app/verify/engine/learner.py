"""The learner process of one rank of an exercise run: the learner's code and the checks program,
confined, with torch.distributed forwarded to the rank's driver (docs/exercises.md).

Forked by the driver (the rank process) before the gloo group exists, it closes every
descriptor but its two pipes and its output, confines itself (sandbox.confine_learner:
an empty network namespace, a uid of its own, no capabilities, non-dumpable,
no_new_privs, a seccomp filter, the run's limits), makes `torch.distributed`'s default
group a `backend.DriverGroup`, says READY and waits for its program. It then runs the
learner's code as `__main__` and the exercise's checks program in a namespace of its own,
sending each `report` and `mark_memory` to the driver, and ends with END.

Nothing here is believed: this process runs code the learner wrote, which can change
any of it. What makes a grade is what the driver saw and measured from outside.
"""

from __future__ import annotations

import builtins
import contextlib
import ctypes
import gc
import io
import json
import math
import os
import signal
import sys
import traceback
import types
from typing import Any, NoReturn

import torch

from app.verify.engine import _linux, backend, sandbox, wire
from app.verify.engine.forbid import CHECKS_FILE, SNIPPET_FILE

MAX_VALUE_BYTES = 2**20
MAX_VALUE_ELEMENTS = 100_000
MAX_TRACEBACK_CHARS = 16_000
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD = 64 * 1024
# Exit status of a learner process whose own set-up failed.
EXIT_SETUP_FAILED = 71
# After END, how long the process waits for its driver to end it.
EXIT_WAIT_S = 5.0


def jsonable(value: Any, _depth: int = 0) -> Any:
    """A reported value as JSON: tensors become nested lists, non-finite floats strings."""
    if _depth > 32:
        raise ValueError("report(): value is nested too deeply")
    if isinstance(value, torch.Tensor):
        if value.numel() > MAX_VALUE_ELEMENTS:
            raise ValueError(f"report(): a tensor of {value.numel()} elements is too large "
                             f"(the cap is {MAX_VALUE_ELEMENTS})")
        value = value.detach().cpu()
        if value.layout != torch.strided:
            value = value.to_dense()
        if value.dtype in (torch.bfloat16, torch.float16) or value.is_quantized:
            value = value.float()
        value = value.tolist()
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


def exception_info(exc: BaseException) -> dict[str, Any]:
    """Type, message, the innermost learner line, and a traceback from the learner's first frame."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = (SNIPPET_FILE, CHECKS_FILE)
    first = next((i for i, f in enumerate(frames) if f.filename in ours), None)
    line = None
    for frame in frames:
        if frame.filename == SNIPPET_FILE:
            line = frame.lineno
    if line is None and isinstance(exc, SyntaxError) and exc.filename == SNIPPET_FILE:
        line = exc.lineno
    cls = type(exc)
    name = cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    try:
        text = "".join(traceback.format_exception(exc))
        if first is not None:
            kept = traceback.StackSummary.from_list(list(frames[first:])).format()
            text = ("Traceback (most recent call last):\n" + "".join(kept)
                    + "".join(traceback.format_exception_only(exc)))
    except Exception:  # out of memory while formatting: keep the essentials
        text = f"{name}: {exc}\n"
    return {"type": name, "message": str(exc)[:4000], "line": line,
            "traceback": text[-MAX_TRACEBACK_CHARS:]}


def secret_header(key: str, shapes: Any, flip_bit: Any = None, on_ranks: Any = None,
                  only: Any = None) -> dict[str, Any]:
    """A secret_tensors call as its SECRET frame says it (the reference phase reads the same)."""
    return {"key": str(key)[:100], "shapes": [[int(d) for d in sh] for sh in shapes],
            "flip_bit": flip_bit, "on_ranks": list(on_ranks or []), "only": only}


def main(*, rank: int, world_size: int, from_driver: int, to_driver: int,
         limits: dict[str, Any], workdir: str, uid: int | None) -> NoReturn:
    """Entry point of the learner process, right after the fork; never returns."""
    status = EXIT_SETUP_FAILED
    try:
        status = _main(rank, world_size, from_driver, to_driver, limits, workdir, uid)
    except BaseException:
        with contextlib.suppress(BaseException):
            traceback.print_exc()
    with contextlib.suppress(BaseException):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(status)


def _main(rank: int, world_size: int, from_driver: int, to_driver: int, limits: dict[str, Any],
          workdir: str, uid: int | None) -> int:
    _linux.set_name(f"ddp-learner-{rank}")  # driver.LEARNER_NAME
    _linux.die_with_parent()
    keep = {0, 1, 2, from_driver, to_driver}
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)
    for sig in (signal.SIGTERM, signal.SIGCHLD, signal.SIGUSR1):
        signal.signal(sig, signal.SIG_DFL)
    # A fixed threshold instead of glibc's rising one: every block this large is mapped on
    # its own and returned to the system when freed, so that the resident memory the driver
    # measures follows what is alive (freed blocks would otherwise stay in malloc's arenas).
    ctypes.CDLL(None).mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)
    confined = sandbox.confine_learner(uid=uid, workdir=workdir, limits=limits)
    os.chdir(workdir)
    os.environ.clear()
    os.environ.update({"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir,
                       "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1"})
    torch.set_num_threads(1)
    link = backend.Link(from_driver, to_driver)
    backend.install(link, rank, world_size, float(limits["pg_timeout_s"]))
    world = backend.default_group()
    link.send(wire.READY, {"pid": os.getpid(), "confined": confined, "world": world})
    program = link.receive_program()
    link.start()
    status = _Program(link, program).run()
    # The driver measures this process once more, then ends it (or closes the pipe).
    link.gone.wait(EXIT_WAIT_S)
    return status


class _Program:
    """The learner's code, then the checks program, as the driver's PROGRAM frame gives them."""

    def __init__(self, link: backend.Link, program: dict[str, Any]) -> None:
        self.link = link
        self.rank = int(program["rank"])
        self.world_size = int(program["world_size"])
        self.params = program["params"]
        self.program = program

    def report(self, source: str) -> Any:
        link = self.link

        def report(name: str, value: Any) -> None:
            """Record a value for this rank (see the snippet contract)."""
            if not isinstance(name, str) or not name:
                raise TypeError("report(name, value): name must be a non-empty string")
            data = jsonable(value)
            size = len(json.dumps(data))
            if size > MAX_VALUE_BYTES:
                raise ValueError(f"report({name!r}): value is {size} bytes as JSON; the cap is "
                                 f"{MAX_VALUE_BYTES}")
            link.send(wire.REPORT, {"name": name, "value": data, "source": source})

        return report

    def mark_memory(self, name: str) -> None:
        """Ask the driver to measure this process's memory now (the checks call it). Garbage
        is collected first, and the link's reader has let go of the last operation's tensors:
        what a mark measures is what the program keeps alive. Code that stops either only makes
        its own process measure larger."""
        gc.collect()
        link = self.link
        link.settle()
        link.request(wire.MARK, {"id": link.next_id(), "name": str(name)[:100]})

    def secret_tensors(self, key: str, shapes: list[list[int]], flip_bit: int | None = None,
                       on_ranks: list[int] | None = None, only: int | None = None) -> list[torch.Tensor]:
        """The run's secret tensors for `key`, from the driver (driver.secret_tensors): drawn
        from a seed this process never holds, each key given once."""
        header = secret_header(key, shapes, flip_bit, on_ranks, only)
        link = self.link
        return link.fetch(wire.SECRET, {"id": link.next_id(), **header},
                          [torch.empty(sh, dtype=torch.float32) for sh in header["shapes"]])

    def run(self) -> int:
        program = self.program
        learner = types.ModuleType("__main__")
        learner.__dict__.update(__file__=SNIPPET_FILE, __builtins__=builtins, rank=self.rank,
                                world_size=self.world_size, params=json.loads(json.dumps(self.params)),
                                report=self.report("learner"))
        sys.modules["__main__"] = learner
        sys.argv = [SNIPPET_FILE]
        with open(SNIPPET_FILE, "w") as f:  # for tracebacks and inspect
            f.write(program["code"])
        # The reference phase starts from the same state of torch's generator (driver.py).
        torch.manual_seed(int(program["rank_seed"]))
        try:
            exec(compile(program["code"], SNIPPET_FILE, "exec", dont_inherit=True), learner.__dict__)
        except BaseException as exc:
            return self._ended(exc, "learner")
        ns: dict[str, Any] = {k: v for k, v in learner.__dict__.items()
                              if not (k.startswith("__") and k.endswith("__"))}
        ns.update(__name__="__checks__", __file__=CHECKS_FILE, __builtins__=builtins,
                  rank=self.rank, world_size=self.world_size,
                  params=json.loads(json.dumps(self.params)), report=self.report("checks"),
                  rank_seed=int(program["rank_seed"]), shared_seed=int(program["shared_seed"]),
                  mark_memory=self.mark_memory, secret_tensors=self.secret_tensors,
                  shared_folder=program.get("shared_folder"))
        try:
            exec(compile(program["checks"], CHECKS_FILE, "exec", dont_inherit=True), ns)
        except BaseException as exc:
            return self._ended(exc, "checks")
        _flush()
        self.link.send(wire.END, {"ok": True})
        return 0

    def _ended(self, exc: BaseException, phase: str) -> int:
        info = exception_info(exc)
        status = 1
        if isinstance(exc, SystemExit):
            code = exc.code
            status = 0 if code is None else code & 0xFF if isinstance(code, int) else 1
            info.update(message=f"sys.exit({code!r})", exit_code=status)
        with contextlib.suppress(BaseException):
            sys.stderr.write(info["traceback"])
        _flush()
        with contextlib.suppress(OSError, backend.DriverGone):
            self.link.send(wire.END, {"ok": False, "phase": phase, "exception": info})
        return status or 1


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            if isinstance(stream, io.TextIOBase):
                stream.flush()
