"""A seccomp filter for the learner process: the system calls it may not make (docs/sandbox.md).

A classic BPF program, installed with prctl through ctypes (no library to install),
after no_new_privs. Refused calls fail with EPERM (fork, clone without
CLONE_THREAD, exec, sockets, pipes and the other ways to hold memory outside the
process or to reach another one); clone3 fails with ENOSYS, so that glibc creates
threads with clone, whose flags the filter can read. A call made under another
architecture's ABI (i386 or x32 on x86-64) kills the process.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_RET_KILL_PROCESS = 0x80000000
_LD_ABS_W = 0x20      # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15           # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35           # BPF_JMP | BPF_JGE | BPF_K
_JSET = 0x45          # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06           # BPF_RET | BPF_K
# struct seccomp_data: nr (u32), arch (u32), instruction pointer (u64), args (6 x u64).
_NR, _ARCH, _ARG0 = 0, 4, 16
_CLONE_THREAD = 0x00010000
_PR_SET_DUMPABLE = 4

# Per architecture: its audit number, and the numbers of the calls refused.
_ARCHES: dict[str, tuple[int, dict[str, int]]] = {
    "x86_64": (0xC000003E, {
        "socket": 41, "socketpair": 53, "fork": 57, "vfork": 58, "execve": 59, "execveat": 322,
        "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "pipe": 22,
        "pipe2": 293, "memfd_create": 319, "memfd_secret": 447, "shmget": 29, "msgget": 68,
        "mq_open": 240, "io_uring_setup": 425, "userfaultfd": 323, "add_key": 248,
        "request_key": 249, "keyctl": 250, "bpf": 321, "perf_event_open": 298, "unshare": 272,
        "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
        "kexec_load": 246, "init_module": 175, "finit_module": 313, "open_by_handle_at": 304,
        "clone": 56, "clone3": 435, "prctl": 157,
    }),
    "aarch64": (0xC00000B7, {
        "socket": 198, "socketpair": 199, "execve": 221, "execveat": 281, "ptrace": 117,
        "process_vm_readv": 270, "process_vm_writev": 271, "pipe2": 59, "memfd_create": 279,
        "memfd_secret": 447, "shmget": 194, "msgget": 186, "mq_open": 180, "io_uring_setup": 425,
        "userfaultfd": 282, "add_key": 217, "request_key": 218, "keyctl": 219, "bpf": 280,
        "perf_event_open": 241, "unshare": 97, "setns": 268, "mount": 40, "umount2": 39,
        "pivot_root": 41, "chroot": 51, "kexec_load": 104, "init_module": 105,
        "finit_module": 273, "open_by_handle_at": 265, "clone": 220, "clone3": 435, "prctl": 167,
    }),
}
# x32 system calls on x86-64 have this bit set in their number.
_X32_BIT = 0x40000000


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


def program(machine: str | None = None) -> bytes:
    """The filter's instructions for this machine's architecture (ValueError if unknown)."""
    machine = machine or platform.machine()
    if machine not in _ARCHES:
        raise ValueError(f"no seccomp filter for the {machine} architecture")
    audit, numbers = _ARCHES[machine]
    eperm = _RET_ERRNO | errno.EPERM
    denied = sorted(n for name, n in numbers.items() if name not in ("clone", "clone3", "prctl"))
    out = [_insn(_LD_ABS_W, 0, 0, _ARCH), _insn(_JEQ, 1, 0, audit),
           _insn(_RET, 0, 0, _RET_KILL_PROCESS), _insn(_LD_ABS_W, 0, 0, _NR)]
    if machine == "x86_64":
        out += [_insn(_JGE, 0, 1, _X32_BIT), _insn(_RET, 0, 0, _RET_KILL_PROCESS)]
    for n in denied:
        out += [_insn(_JEQ, 0, 1, n), _insn(_RET, 0, 0, eperm)]
    # clone3 passes its flags in memory the filter cannot read: ENOSYS makes glibc use clone.
    out += [_insn(_JEQ, 0, 1, numbers["clone3"]), _insn(_RET, 0, 0, _RET_ERRNO | errno.ENOSYS)]
    # clone: a thread (CLONE_THREAD) is allowed, a new process is not.
    out += [_insn(_JEQ, 0, 4, numbers["clone"]), _insn(_LD_ABS_W, 0, 0, _ARG0),
            _insn(_JSET, 1, 0, _CLONE_THREAD), _insn(_RET, 0, 0, eperm),
            _insn(_RET, 0, 0, _RET_ALLOW)]
    # prctl(PR_SET_DUMPABLE, ...): the process may not make itself readable (or its peak
    # memory resettable through /proc/self/clear_refs) again.
    out += [_insn(_JEQ, 0, 3, numbers["prctl"]), _insn(_LD_ABS_W, 0, 0, _ARG0),
            _insn(_JEQ, 0, 1, _PR_SET_DUMPABLE), _insn(_RET, 0, 0, eperm)]
    out += [_insn(_RET, 0, 0, _RET_ALLOW)]
    return b"".join(out)


def install() -> None:
    """Install the filter on this process (and its threads made from now on); OSError if the
    kernel refuses. Sets no_new_privs first, which an unprivileged process needs."""
    libc = ctypes.CDLL(None, use_errno=True)
    code = program()
    n = len(code) // 8
    buf = ctypes.create_string_buffer(code, len(code))

    class _Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = _Prog(n, ctypes.cast(buf, ctypes.c_void_p))
    ulong = ctypes.c_ulong
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, ulong(1), ulong(0), ulong(0), ulong(0)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if libc.prctl(_PR_SET_SECCOMP, ulong(_SECCOMP_MODE_FILTER), ctypes.byref(prog), ulong(0),
                  ulong(0)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, "prctl(PR_SET_SECCOMP): the kernel refused the filter")
