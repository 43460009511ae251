"""The few Linux process controls the standard library lacks (prctl), used by the leader and ranks."""

from __future__ import annotations

import ctypes
import os
import signal

_PR_SET_PDEATHSIG = 1
_PR_SET_NAME = 15
_PR_SET_CHILD_SUBREAPER = 36

_libc = ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, value: int) -> None:
    if _libc.prctl(option, value, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def set_name(name: str) -> None:
    """Name this process as `ps`, `top` and `perf` show it (at most 15 bytes are kept)."""
    _libc.prctl(_PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """Ask the kernel to send `sig` to this process when its parent exits."""
    _prctl(_PR_SET_PDEATHSIG, sig)


def become_subreaper() -> None:
    """Make orphaned descendants reparent to this process instead of init, so it can kill them."""
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def children_of(pid: int) -> list[int]:
    """Direct children of a single-threaded process (zombies included)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except FileNotFoundError:
        return []


def name_of(pid: int) -> str:
    """A process's name (what set_name gave it); empty once it is gone."""
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""
