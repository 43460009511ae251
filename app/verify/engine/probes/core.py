"""What every probe shares: the emitter, sequence numbers, who called, and completion tracking.

No torch here. The other probe modules record through one `Recorder`, so a
collective, a bucket reduction and a pipeline stage draw their `seq` from one
counter and a rank's `settle()` waits for all of their callbacks.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

from app.verify.engine.probes.sockets import GlooSockets

SNIPPET_FILE = "snippet.py"

Emit = Callable[..., None]

_ERROR_CHARS = 2000


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

    def next_seq(self) -> int:
        with self._seq_lock:
            return next(self._seq)

    def where(self, frame: Any) -> dict[str, Any]:
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
