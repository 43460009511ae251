"""The verify engine's public face: run a snippet on real gloo ranks and get a RunResult.

    from app.verify.engine import get_engine, Limits
    result = get_engine().run(code, world_size=2, params={"divide": False},
                              limits=Limits(timeout_s=5))

The engine process never imports torch. Ranks fork from a warm forkserver that
started once, lazily, on the first run (see pool.py, zygote.py), so a run does not
import torch again. `Engine.run` is thread-safe. A snippet's own error or hang is a
RunResult (outcome "error" / "timeout"); a broken engine raises EngineFailure.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import threading
from functools import lru_cache
from importlib import metadata
from typing import Any

from app.verify.engine import runner
from app.verify.engine.errors import EngineFailure, SandboxUnavailable, SnippetSyntaxError
from app.verify.engine.limits import Limits
from app.verify.engine.pool import Pool
from app.verify.engine.result import RESULT_VERSION, BucketRecord, RankResult, RunResult
from app.verify.engine.sandbox import probe as sandbox_probe

__all__ = [
    "HARNESS_VERSION",
    "MAX_WORLD_SIZE",
    "RESULT_VERSION",
    "BucketRecord",
    "Engine",
    "EngineFailure",
    "Limits",
    "RankResult",
    "RunResult",
    "SandboxUnavailable",
    "SnippetSyntaxError",
    "check_snippet",
    "get_engine",
    "sandbox_status",
    "torch_version",
]

# Part of every run's cache key: bump it whenever the harness or probes change
# what a run measures or reports.
# 4: an output flood is truncated and the run goes on (it used to stop the run).
# 6: a malformed line on a rank's event channel makes that rank an error (it was dropped).
# 7: collectives that reach c10d without torch.distributed's Python functions (functional
#    collectives of DTensor/TP/FSDP2, *_single, ProcessGroup methods) are recorded.
# 8: pipeline stages' forward and backward per micro-batch (stage_* events, `pipeline`).
# 9: exercise runs execute the learner's code and the checks apart (forbid.split), with
#    checks_start/checks_done and sequence-numbered events; ranks run at the caller's nice.
# 11: bytes on the wire count once gloo has written them (tcpi_notsent_bytes added): a rank
#     that finished a collective before the kernel sent its last small message read 0.
# 12: an exercise's learner code runs in a learner process of its own per rank, its
#     collectives performed and recorded by the rank's driver; the reference solution runs in
#     the driver on the same secret data (reference values, bytes, memory marks).
# 13: a memory mark counts the bytes written to the run's scratch file system since the learner
#     process was ready, read with statvfs from outside (a file in a folder the learner closed,
#     or unlinked while open, no longer hides).
# 14: before a memory mark the learner process collects garbage and waits until its link's
#     reader has let go of the last operation's tensors (a dropped temporary counted at times).
# 15: checks can ask the drivers for secret tensors (`secret_tensors`), drawn from a seed only
#     the drivers hold, each key once, with an optional bit flipped on one drawn rank (the
#     flip drawn from a hash apart from the values).
HARNESS_VERSION = "15"
MIN_WORLD_SIZE = 1
MAX_WORLD_SIZE = 8
# Snippets are short programs; anything larger is a mistake.
MAX_SNIPPET_BYTES = 256 * 1024
MAX_PARAMS_BYTES = 64 * 1024


@lru_cache(maxsize=1)
def torch_version() -> str:
    """The installed torch's version, read from package metadata (torch is not imported)."""
    return metadata.version("torch")


MAX_LAMBDAS = 200
_LAMBDA = re.compile(r"\blambda\b")


def check_snippet(code: str) -> None:
    """Raise SnippetSyntaxError (with .line) if `code` does not compile."""
    if len(code.encode()) > MAX_SNIPPET_BYTES:
        raise SnippetSyntaxError(f"the snippet is larger than {MAX_SNIPPET_BYTES} bytes")
    # Compiling nested scopes costs time quadratic in their depth, in the web process.
    # No snippet needs this many.
    lambdas = len(_LAMBDA.findall(code))
    if lambdas > MAX_LAMBDAS:
        raise SnippetSyntaxError(f"the code has {lambdas} lambdas; at most {MAX_LAMBDAS} are allowed")
    try:
        compile(code, "snippet.py", "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise SnippetSyntaxError(exc.msg, exc.lineno, exc.offset) from None
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, absurd nesting
        raise SnippetSyntaxError(str(exc) or type(exc).__name__) from None


@lru_cache(maxsize=2)
def sandbox_status(enabled: bool) -> tuple[str, str]:
    """("on" | "off" | "unavailable", a sentence for the log): what runs will be confined by.

    "unavailable" means the setting asks for the sandbox and the host cannot build
    it: runs then fail with SandboxUnavailable rather than run unconfined.
    """
    if not enabled:
        return "off", ("snippets run WITHOUT the sandbox (DDPDRILL_SANDBOX=off): they can reach "
                       "everything the server can (docs/sandbox.md)")
    reason = sandbox_probe()
    if reason is not None:
        return "unavailable", (f"the verify sandbox is unavailable: {reason}. Verify runs will be "
                               "refused; set DDPDRILL_SANDBOX=off to run snippets unsandboxed "
                               "(docs/sandbox.md)")
    return "on", "snippets run in the namespace sandbox (docs/sandbox.md)"


class Engine:
    """Runs snippets on fresh gloo ranks forked from one warm forkserver."""

    def __init__(self, *, python: str | None = None, sandbox: bool = True) -> None:
        self._pool = Pool(python=python, sandbox=sandbox)
        self._closed = False

    @property
    def forkserver_pid(self) -> int | None:
        return self._pool.pid

    @property
    def sandboxed(self) -> bool:
        """Whether runs happen inside the namespace sandbox (docs/sandbox.md)."""
        return self._pool.sandbox

    @property
    def forkserver_starts(self) -> int:
        """How many times the forkserver has been started (restarts included)."""
        return self._pool.starts

    def start(self) -> None:
        """Start the forkserver now instead of on the first run (takes a few seconds once)."""
        self._check_open()
        self._pool.ensure_started()

    def run(self, code: str, *, world_size: int = 2, params: dict[str, Any] | None = None,
            limits: Limits | None = None, trace_buckets: bool = True) -> RunResult:
        """Run `code` under the snippet contract on `world_size` gloo ranks.

        Raises SnippetSyntaxError if the code does not compile, ValueError for a
        world size outside 1..8 or params that are not JSON, and EngineFailure if
        the engine itself broke. `trace_buckets=False` leaves DDP's built-in
        gradient reduction untouched (no bucket records); it exists to check that
        the bucket probe changes nothing.
        """
        self._check_open()
        if not isinstance(world_size, int) or not MIN_WORLD_SIZE <= world_size <= MAX_WORLD_SIZE:
            raise ValueError(f"world_size must be between {MIN_WORLD_SIZE} and {MAX_WORLD_SIZE}, "
                             f"not {world_size}")
        check_snippet(code)
        params = dict(params or {})
        try:
            encoded = json.dumps(params, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"params must be JSON: {exc}") from None
        if len(encoded) > MAX_PARAMS_BYTES:
            raise ValueError(f"params are larger than {MAX_PARAMS_BYTES} bytes as JSON")
        return runner.run(self._pool, code=code, world_size=world_size,
                          params=json.loads(encoded), limits=limits or Limits(),
                          trace_buckets=trace_buckets, torch_version=torch_version(),
                          harness_version=HARNESS_VERSION)

    def close(self) -> None:
        """Stop the forkserver. Runs in flight finish or fail; later runs raise."""
        self._closed = True
        self._pool.close()

    def _check_open(self) -> None:
        if self._closed:
            raise EngineFailure("the engine is closed")

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_engine: Engine | None = None
_engine_pid: int | None = None
_engine_lock = threading.Lock()


def get_engine(*, sandbox: bool = True) -> Engine:
    """The process-wide engine; its forkserver starts on first use (per process, fork-safe).

    Callers pass the DDPDRILL_SANDBOX setting; asking for the other mode replaces the engine.
    """
    global _engine, _engine_pid
    with _engine_lock:
        if _engine is not None and _engine_pid == os.getpid() and _engine.sandboxed != sandbox:
            _engine.close()
        if _engine is None or _engine_pid != os.getpid() or _engine._closed:
            _engine = Engine(sandbox=sandbox)
            _engine_pid = os.getpid()
            atexit.register(_engine.close)
        return _engine
