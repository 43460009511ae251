"""The engine's handle on the warm forkserver (app.verify.engine.zygote): start, restart, send runs.

The engine process itself never imports torch. It starts the forkserver once,
lazily, with a scrubbed environment (inside the namespace sandbox unless told
otherwise, see sandbox.py), and restarts it transparently when it has died.
Sending a run is one SOCK_SEQPACKET message whose SCM_RIGHTS carry the run's
control socket and rank pipes; the forkserver forks that run's leader.
"""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from app.verify.engine.errors import EngineFailure, SandboxUnavailable

# The first start imports torch from disk; a cold cache can take a while.
START_TIMEOUT_S = 120.0
_ROOT = Path(__file__).resolve().parents[3]


def _forkserver_env() -> dict[str, str]:
    """Only what the forkserver needs: none of the app's settings or secrets."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": tempfile.gettempdir(),
        "PYTHONPATH": str(_ROOT),
        "PYTHONDONTWRITEBYTECODE": "1",
        "OMP_NUM_THREADS": "1",
    }


class Pool:
    """One forkserver process; thread-safe."""

    def __init__(self, *, python: str | None = None, start_timeout_s: float = START_TIMEOUT_S,
                 sandbox: bool = True):
        self._python = python or sys.executable
        self.sandbox = sandbox
        self._start_timeout_s = start_timeout_s
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the pool
        self.starts = 0

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def ensure_started(self) -> None:
        with self._lock:
            if not self.alive():
                self._start()

    def submit(self, fds: list[int]) -> None:
        """Hand one run's descriptors to the forkserver; restarts it once if it has died."""
        with self._lock:
            for attempt in (1, 2):
                if not self.alive():
                    self._start()
                assert self._sock is not None
                try:
                    socket.send_fds(self._sock, [b"run"], fds)
                    return
                except OSError as exc:
                    if attempt == 2:
                        raise EngineFailure(f"the forkserver refused a run: {exc}") from exc
                    self._stop()

    def close(self) -> None:
        """Stop the forkserver for good."""
        with self._lock:
            self._stop()
            self._log.close()

    def log_tail(self, limit: int = 4000) -> str:
        try:
            self._log.seek(0, os.SEEK_END)
            size = self._log.tell()
            self._log.seek(max(0, size - limit))
            return self._log.read().decode(errors="replace")
        except (OSError, ValueError):
            return ""

    def _start(self) -> None:
        self._stop()
        if self._log.closed:
            raise EngineFailure("the forkserver pool is closed")
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._proc = subprocess.Popen(
                [self._python, "-m", "app.verify.engine.zygote", str(theirs.fileno()),
                 "sandbox" if self.sandbox else "no-sandbox"],
                pass_fds=[theirs.fileno()], env=_forkserver_env(), cwd=str(_ROOT),
                stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log,
                # Its own session: a Ctrl-C meant for the engine's terminal must not reach it.
                start_new_session=True,
            )
        except OSError as exc:
            ours.close()
            raise EngineFailure(f"could not start the forkserver: {exc}") from exc
        finally:
            theirs.close()
        self._sock = ours
        deadline = time.monotonic() + self._start_timeout_s
        while True:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([ours], [], [], max(0.0, min(left, 0.5)))
            if ready:
                msg = ours.recv(4096)
                if msg.startswith(b"ready"):
                    self.starts += 1
                    return
                if msg.startswith(b"error "):
                    self._stop()
                    raise SandboxUnavailable(msg[6:].decode(errors="replace"))
            if self._proc.poll() is not None or left <= 0:
                tail = self.log_tail()
                self._stop()
                raise EngineFailure(f"the forkserver did not start:\n{tail}")

    def _stop(self) -> None:
        if self._sock is not None:
            self._sock.close()  # the forkserver exits when it reads EOF
            self._sock = None
        if self._proc is not None:
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None
