"""Waking verify workers in other processes on SQLite, which has no NOTIFY.

Each worker pool on a SQLite file listens on a datagram socket in a folder beside the
file; whoever queues a run sends one byte to every socket there once it has committed.
Without it a run queued by one process (a web process of `serve --processes`, the CLI)
waits for another process's idle worker to look (worker.POLL_SECONDS).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import uuid
from pathlib import Path

from sqlalchemy import make_url


def wake_folder(database_url: str) -> Path | None:
    """Where the workers of every process on this SQLite file listen to be woken (a folder
    beside the file), or None for PostgreSQL (NOTIFY does it) and in-memory databases."""
    database = make_url(database_url).database
    if not database_url.startswith("sqlite") or not database or database == ":memory:" \
            or database.startswith("file:"):
        return None
    return Path(f"{database}-wake")


def wake_all(folder: Path) -> None:
    """Wake the workers of every process on this SQLite file: one datagram to each pool's socket.

    A socket whose process is gone (it was killed) is removed.
    """
    try:
        names = os.listdir(folder)
    except OSError:
        return
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
        sender.setblocking(False)
        for name in names:
            path = folder / name
            try:
                sender.sendto(b"!", str(path))
            except (ConnectionRefusedError, FileNotFoundError):
                path.unlink(missing_ok=True)
            except OSError:  # its queue is full: it has been woken already
                pass


class WakeSocket:
    """A pool's socket in the wake folder; a thread sets the pool's wake-up on each datagram."""

    def __init__(self, folder: Path, wakeup: threading.Event) -> None:
        folder.mkdir(mode=0o700, exist_ok=True)
        self.path = folder / f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(self.path))
        self.wakeup = wakeup
        threading.Thread(target=self._receive, name="verify-wake", daemon=True).start()

    def _receive(self) -> None:
        while True:
            try:
                self.sock.recv(16)
            except OSError:  # closed
                return
            self.wakeup.set()

    def close(self) -> None:
        self.path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
