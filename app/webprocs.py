"""Several uvicorn web processes on one port, each with a listening socket of its own.

uvicorn's `workers=N` binds one socket and hands it to every process, and each takes
connections off it as fast as it can: a process that wakes for a burst accepts all of
it (asyncio accepts up to the backlog per wake-up). Measured with 64 keep-alive clients
connecting at once to `serve --processes 2`: all 64 connections were held by one process,
the other took no request, and two processes answered no faster than one
(docs/performance.md). Here each process opens its own socket with SO_REUSEPORT and the
kernel spreads new connections across them by their addresses' hash. A keep-alive
client (a browser, or a proxy's pool) stays with the process it landed on, so spreading
connections is what spreads the load.

uvicorn's supervisor is kept (it restarts a process that dies and passes on signals);
only the socket a process serves changes. The parent binds the address first, without
listening, so the port is reserved and a taken port fails at once, as with one process.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import sys
from collections.abc import Iterator
from typing import Any

import uvicorn
from uvicorn.supervisors import multiprocess

PR_SET_PDEATHSIG = 1  # prctl(2)


def _own_listener(shared: socket.socket, backlog: int) -> socket.socket:
    """A new socket listening on `shared`'s address in this process (SO_REUSEPORT)."""
    own = socket.socket(shared.family, shared.type)
    own.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    own.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    own.bind(shared.getsockname())
    own.listen(backlog)
    shared.close()  # this process's copy of the reservation; the parent keeps its own
    return own


def _exit_with_parent(parent: int) -> None:
    """Have the kernel send this process SIGTERM when its parent dies (Linux).

    A supervisor killed outright (SIGKILL, the OOM killer) cannot stop its web processes;
    left running, they would keep serving the port, and the restarted `serve` would find
    it taken.
    """
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # it died before the request was in place
        os.kill(os.getpid(), signal.SIGTERM)


class OwnSocketProcess(multiprocess.Process):
    """uvicorn's worker process, serving a listening socket of its own, and ending with its
    supervisor."""

    def __init__(self, config: uvicorn.Config, sockets: list[socket.socket]) -> None:
        super().__init__(config, sockets)
        self.parent = os.getpid()

    def target(self, sockets: list[socket.socket] | None = None) -> None:  # pragma: no cover
        # Runs in the child process (the subprocess tests cover it).
        _exit_with_parent(self.parent)
        super().target([_own_listener(s, self.config.backlog) for s in sockets or []])


def reserve(host: str, port: int) -> socket.socket:
    """The address bound (not listening) with SO_REUSEPORT, or exit 1 if something serves it.

    SO_REUSEPORT lets any process of this user bind the port again, so a second server
    started by mistake would silently share it; a server already answering there is refused.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
        print(f"ERROR: something already listens on {host}:{port}", file=sys.stderr)
        raise SystemExit(1)
    sock = socket.socket(family)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        print(f"ERROR: cannot listen on {host}:{port}: {exc}", file=sys.stderr)
        raise SystemExit(1) from exc
    return sock


@contextlib.contextmanager
def _own_socket_processes() -> Iterator[None]:
    # uvicorn's supervisor makes its processes (and restarts them) through this name.
    saved, multiprocess.Process = multiprocess.Process, OwnSocketProcess  # type: ignore[misc]
    try:
        yield
    finally:
        multiprocess.Process = saved  # type: ignore[misc]


def serve_processes(app: str, reserved: socket.socket, *, processes: int, **options: Any) -> None:
    """Run `processes` uvicorn processes of `app` ("module:attribute") on the address
    `reserved` holds (see reserve) until interrupted, then close it; `options` are
    uvicorn.Config's (factory, log_level, ...)."""
    host, port = reserved.getsockname()[:2]
    config = uvicorn.Config(app, host=host, port=port, workers=processes, **options)
    try:
        with _own_socket_processes():
            multiprocess.Multiprocess(config, sockets=[reserved]).run()
    finally:
        reserved.close()
