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


_MADV_COLLAPSE = 25  # Linux 6.1+
_HUGE_PAGE = 2 * 1024 * 1024


def collapse_heap_into_huge_pages() -> int:
    """Back this process's large anonymous regions with 2 MiB pages; bytes collapsed.

    For the forkserver once it has imported torch: each fork copies, and each exit tears
    down, one page-table entry per 4 KiB page of them otherwise (tens of thousands), which
    was about half the CPU of a trivial run. MADV_COLLAPSE works whatever the system's
    transparent-huge-page setting short of never, and sets no flag on the regions, so the
    children's own new memory stays in small pages. A kernel without it (EINVAL) or short
    of huge pages (EAGAIN, ENOMEM) leaves a region as it was.
    """
    collapsed = 0
    with open("/proc/self/maps") as maps:
        regions = [line.split() for line in maps]
    for fields in regions:
        span, perms, inode = fields[0], fields[1], fields[4]
        name = fields[5] if len(fields) > 5 else ""
        if inode != "0" or not perms.startswith("rw") or name not in ("", "[heap]"):
            continue
        start, end = (int(x, 16) for x in span.split("-"))
        first = -(-start // _HUGE_PAGE) * _HUGE_PAGE
        last = end // _HUGE_PAGE * _HUGE_PAGE
        if last - first < _HUGE_PAGE:
            continue
        if _libc.madvise(ctypes.c_void_p(first), ctypes.c_size_t(last - first),
                         _MADV_COLLAPSE) == 0:
            collapsed += last - first
    return collapsed
