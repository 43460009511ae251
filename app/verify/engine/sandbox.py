"""The namespaces the forkserver, every run's leader and every rank live in (see docs/sandbox.md).

Built with plain Linux system calls through ctypes, no helper program:

1. `enter()` runs first thing in the forkserver's process (host root). It
   creates a PID namespace and forks the real forkserver, PID 1 inside it; the
   original process stays outside only to write the user-id map and to wait.
2. The forkserver makes a private mount namespace, builds a new root on a tmpfs
   from read-only bind mounts (system libraries, the Python installation, the
   virtualenv, the `app` package), a minimal /dev and a /proc of its own PID
   namespace, and pivots into it. Nothing else of the host filesystem is reachable.
3. It then enters new user, mount, network, IPC and UTS namespaces. Its uid 0
   there maps to an unprivileged host uid, so even the forkserver holds no
   privilege over the host; only loopback exists, and it is brought up for gloo.
4. Each run's leader (`enter_run`) makes its own mount, network and IPC
   namespaces, with a fresh, size-capped tmpfs on /tmp: the run's scratch folder,
   which vanishes with the run's last process.
5. Each rank (`confine_rank`) switches to a uid of its own run, sets
   no_new_privs and an RLIMIT_NPROC that the kernel enforces for that uid.
6. In an exercise run each rank's learner process (`confine_learner`) enters a
   network namespace of its own with no interface up, switches to a uid of its own
   rank, makes itself non-dumpable and installs the seccomp filter (seccomp.py).
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import platform
import resource
import signal
import site
import socket
import struct
import sys
from pathlib import Path
from typing import Any

from app.verify.engine import _linux, seccomp

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2
_PR_SET_DUMPABLE = 4
_PR_SET_NO_NEW_PRIVS = 38
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}

# Inside, uid 0 (the forkserver and leaders) is host uid HOST_UID_BASE, and the
# ranks of the run whose leader has PID p run as uid RUN_UID_BASE + p: every run
# has a uid nobody else has, so the kernel counts its processes on their own and
# `kill(-1)` with that uid reaches exactly that run's leftovers.
HOST_UID_BASE = 2_000_000_000
RUN_UID_BASE = 100_000
# The learner process of rank r of that run runs as RUN_UID_BASE + (r + 1) * PID_SPAN + p:
# a uid of its own, which can neither signal nor trace the driver nor another rank's learner.
PID_SPAN = 2**22  # the kernel's largest pid_max
MAX_RANKS = 8
UID_MAP_SIZE = RUN_UID_BASE + (MAX_RANKS + 1) * PID_SPAN
# Threads of one learner process (RLIMIT_NPROC of its own uid): its own, torch's, the pipe's.
LEARNER_THREADS = 32
# The per-run scratch tmpfs before the run's own limit is known.
DEFAULT_SCRATCH_BYTES = 64 * 2**20
SCRATCH_DIR = "/tmp"
# Python directories that live under SCRATCH_DIR on the host (an install or checkout in
# /tmp) are bound here read-only, and bound again into every scratch tmpfs mounted over
# SCRATCH_DIR, so that /tmp stays each run's own and the interpreter still finds them.
_TMP_STASH = "/.host-tmp"
_tmp_binds: list[str] = []
SCRATCH_INODES = 4096
HOSTNAME = "ddpdrill-sandbox"
ALL_NAMESPACES = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
_ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "alternatives")
_DEVICES = ("null", "zero", "full", "random", "urandom")
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong,
                        ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.sethostname.argtypes = [ctypes.c_char_p, ctypes.c_size_t]

# True in the forkserver and everything forked from it once the sandbox is up.
active = False


class SandboxUnavailable(OSError):
    """The host does not let the forkserver build its namespaces."""


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _enc(value: str | None) -> bytes | None:
    return None if value is None else value.encode()


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int,
          data: str | None = None) -> None:
    _check(_libc.mount(_enc(source), _enc(target), _enc(fstype), flags, _enc(data)),
           f"mount {target}")


def _umount(target: str) -> None:
    _check(_libc.umount2(target.encode(), MNT_DETACH), f"umount {target}")


def _pivot_root(new_root: str, put_old: str) -> None:
    number = _SYS_PIVOT_ROOT.get(platform.machine())
    if number is None:
        raise SandboxUnavailable(f"pivot_root: unknown architecture {platform.machine()}")
    _check(_libc.syscall(number, new_root.encode(), put_old.encode()), "pivot_root")


def no_new_privs() -> None:
    _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")


def run_uid(leader_pid: int) -> int:
    return RUN_UID_BASE + leader_pid


def learner_uid(leader_pid: int, rank: int) -> int:
    return RUN_UID_BASE + (rank + 1) * PID_SPAN + leader_pid


def probe() -> str | None:
    """None if this host lets the engine build its sandbox; otherwise why not.

    Cheap (one fork that only calls unshare): the app calls it at start-up to say
    clearly, before any run, that snippets cannot be sandboxed.
    """
    if not sys.platform.startswith("linux"):
        return f"namespaces need Linux, not {sys.platform}"
    if platform.machine() not in _SYS_PIVOT_ROOT:
        return f"unsupported architecture {platform.machine()}"
    if os.geteuid() != 0:
        return ("the sandbox maps a range of user ids and bind-mounts the Python installation: "
                "the app must start as root (it drops to unprivileged ids inside)")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(r)
            unshare(CLONE_NEWPID | ALL_NAMESPACES)
        except OSError as exc:
            os.write(w, str(exc).encode()[:500])
            code = 1
        os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        message = f.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        return f"the host does not allow new namespaces ({message or 'unknown error'})"
    return None


# --- The forkserver --------------------------------------------------------------


def enter(sock: socket.socket, app_dir: Path) -> None:
    """Move this process into the sandbox; returns in the sandboxed forkserver.

    The calling process forks; the child returns from here as PID 1 of the new
    PID namespace, inside every other namespace too. The parent never returns:
    it writes the child's uid and gid maps, then waits for it and exits with it.
    Raises SandboxUnavailable (in the caller, before any fork) if the host refuses.
    """
    global active
    if os.geteuid() != 0:
        raise SandboxUnavailable(probe() or "the app must start as root")
    os.setgroups([])  # no supplementary host group (root's) may follow us inside
    to_parent_r, to_parent_w = os.pipe()
    to_child_r, to_child_w = os.pipe()
    try:
        unshare(CLONE_NEWPID)
    except OSError as exc:
        raise SandboxUnavailable(f"the host does not allow a PID namespace ({exc})") from None
    pid = os.fork()
    if pid == 0:
        os.close(to_parent_r)
        os.close(to_child_w)
        try:
            # The outside process is the one the engine watches: if it dies, so do we
            # (and, as PID 1, everything in the namespace with us).
            _linux.die_with_parent()
            _build_root(app_dir)
            unshare(ALL_NAMESPACES)
            os.write(to_parent_w, b"map")
            if os.read(to_child_r, 16) != b"go":
                raise SandboxUnavailable("the uid map was not written")
            os.setresgid(0, 0, 0)
            os.setresuid(0, 0, 0)
            # The forkserver's own /tmp (imports probe for a usable temporary
            # directory); each run mounts its own over it.
            mount("tmpfs", SCRATCH_DIR, "tmpfs", MS_NOSUID | MS_NODEV,
                  "size=1m,nr_inodes=256,mode=0700")
            _rebind_tmp()
            _loopback_up()
            host = HOSTNAME.encode()
            _check(_libc.sethostname(host, len(host)), "sethostname")
        except BaseException as exc:
            with contextlib.suppress(OSError):
                sock.send(f"error the sandbox could not be built: {exc}".encode())
            os._exit(1)
        finally:
            os.close(to_parent_w)
            os.close(to_child_r)
        active = True
        return
    # Outside: no business with the engine's socket any more.
    sock.close()
    os.close(to_parent_w)
    os.close(to_child_r)
    if os.read(to_parent_r, 16) == b"map":
        size = UID_MAP_SIZE
        try:
            for name in ("uid_map", "gid_map"):
                with open(f"/proc/{pid}/{name}", "w") as f:
                    f.write(f"0 {HOST_UID_BASE} {size}\n")
            os.write(to_child_w, b"go")
        except OSError as exc:
            print(f"writing the sandbox's uid map failed: {exc}", file=sys.stderr)
    os.close(to_child_w)
    os.close(to_parent_r)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _, status = os.waitpid(pid, 0)
    os._exit(max(0, os.waitstatus_to_exitcode(status)))


def _python_dirs(app_dir: Path) -> list[str]:
    """Every directory the interpreter and its packages load from, besides the system's."""
    dirs = {sys.base_prefix, sys.prefix, sys.exec_prefix, str(app_dir)}
    with contextlib.suppress(AttributeError):
        dirs.update(site.getsitepackages())
    dirs.add(os.path.dirname(os.path.realpath(sys.executable)))
    return [os.path.realpath(d) for d in dirs if os.path.isdir(d)]


def _build_root(app_dir: Path) -> None:
    """A private mount namespace whose root shows only what a rank needs, read-only."""
    python_dirs = sorted(_python_dirs(app_dir))  # while the host's paths still resolve
    unshare(CLONE_NEWNS)
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    # A scratch tmpfs to pivot into, so the host root can be reached as /oldroot
    # while the new root is assembled from it.
    mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755")
    os.mkdir("/tmp/oldroot")
    os.mkdir("/tmp/newroot")
    _pivot_root("/tmp", "/tmp/oldroot")
    os.chdir("/")
    new = "/newroot"
    mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=4096,mode=0755")

    bound: list[str] = []

    def bind(path: str, *, devices: bool = False) -> None:
        source = "/oldroot" + path
        under_tmp = path == SCRATCH_DIR or path.startswith(SCRATCH_DIR + "/")
        target = new + (_TMP_STASH + path if under_tmp else path)
        if under_tmp:
            _tmp_binds.append(path)
        if os.path.islink(source):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.symlink(os.readlink(source), target)
            return
        if os.path.isdir(source):
            os.makedirs(target, exist_ok=True)
        elif os.path.exists(source):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            open(target, "a").close()
        else:
            return
        mount(source, target, None, MS_BIND | MS_REC)
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | (0 if devices else MS_NODEV)
        mount(None, target, None, flags)
        bound.append(path)

    for path in _SYSTEM_DIRS:
        bind(path)
    for path in python_dirs:
        if not any(path == b or path.startswith(b + "/") for b in bound):
            bind(path)
    for name in _ETC_FILES:
        bind(f"/etc/{name}")
    etc = Path(new, "etc")
    etc.mkdir(exist_ok=True)
    (etc / "passwd").write_text("root:x:0:0:sandbox:/tmp:/bin/false\n"
                                "snippet:x:1000:1000:snippet:/tmp:/bin/false\n")
    (etc / "group").write_text("root:x:0:\nsnippet:x:1000:\n")
    # gloo and the TCPStore look up their peers' names: only this file may answer
    # (there is no DNS inside), including for the IPv4-mapped form of loopback.
    (etc / "hosts").write_text(f"127.0.0.1 localhost {HOSTNAME}\n::1 localhost\n"
                               "::ffff:127.0.0.1 localhost\n")
    (etc / "nsswitch.conf").write_text("passwd: files\ngroup: files\nhosts: files\n")
    (etc / "hostname").write_text(HOSTNAME + "\n")

    dev = new + "/dev"
    os.mkdir(dev)
    mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=0755")
    for name in _DEVICES:
        bind(f"/dev/{name}", devices=True)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2"),
                         ("shm", SCRATCH_DIR)):
        os.symlink(target, f"{dev}/{name}")
    mount(None, dev, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC)

    os.mkdir(new + "/proc")
    # This process is already in the new PID namespace: the proc it mounts lists
    # only the sandbox's processes.
    mount("proc", new + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.mkdir(new + SCRATCH_DIR)

    _umount("/oldroot")
    os.chdir(new)
    _pivot_root(".", ".")
    _umount(".")
    os.chdir("/")
    mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _rebind_tmp() -> None:
    """Show the stashed host directories under SCRATCH_DIR again, read-only, inside the
    tmpfs just mounted there (see _TMP_STASH)."""
    for path in _tmp_binds:
        os.makedirs(path, exist_ok=True)
        mount(_TMP_STASH + path, path, None, MS_BIND | MS_REC)
        mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        import fcntl

        req = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(s.fileno(), _SIOCGIFFLAGS, req))[1]
        fcntl.ioctl(s.fileno(), _SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | _IFF_UP))


def kill_run(leader_pid: int) -> None:
    """Kill every process of the run led by `leader_pid` (its uids'), wherever it is in the tree.

    A forked child takes each of the run's uids in turn (the ranks', then each learner
    process's) and sends SIGKILL to -1: the kernel lets a process with no privilege signal
    exactly the processes of its own uid.
    """
    for uid in (run_uid(leader_pid), *(learner_uid(leader_pid, r) for r in range(MAX_RANKS))):
        pid = os.fork()
        if pid == 0:
            try:
                os.setresgid(uid, uid, uid)
                os.setresuid(uid, uid, uid)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


# --- Runs and ranks ---------------------------------------------------------------


def enter_run(leader_pid: int, scratch_bytes: int = DEFAULT_SCRATCH_BYTES) -> None:
    """Give this run's leader its own mount, network and IPC namespaces and a fresh scratch tmpfs.

    Runs at the same moment then share no port, socket or shared memory: one cannot
    reach another's rendezvous store.
    """
    uid = run_uid(leader_pid)
    unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC)
    _loopback_up()
    mount("tmpfs", SCRATCH_DIR, "tmpfs", MS_NOSUID | MS_NODEV,
          f"size={scratch_bytes},nr_inodes={SCRATCH_INODES},mode=0711,uid={uid},gid={uid}")
    _rebind_tmp()


def resize_scratch(scratch_bytes: int) -> None:
    mount(None, SCRATCH_DIR, None, MS_REMOUNT | MS_NOSUID | MS_NODEV,
          f"size={scratch_bytes},nr_inodes={SCRATCH_INODES}")


def confine_rank(leader_pid: int, processes: int) -> None:
    """Drop to the run's uid (no capability left), forbid gaining any, cap the process count."""
    uid = run_uid(leader_pid)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    # Changing uid made the process non-dumpable, which hides its own /proc/self
    # files from it; only processes of this run's uid could look at it anyway.
    _check(_libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0), "prctl(DUMPABLE)")
    no_new_privs()
    # Counted per uid, threads included, across the run's ranks.
    resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))


def confine_learner(*, uid: int | None, workdir: str, limits: dict[str, Any]) -> bool:
    """Lock a learner process down before it runs anything (docs/sandbox.md); whether all of
    it held: off the sandbox there is no uid of its own (`uid` None), and a host that is not
    root gives no network namespace either. The rest holds everywhere.

    Runs in the learner process right after its fork from the driver, while it still has
    the driver's privileges inside the sandbox: an empty network namespace (no interface is
    up, so no address is reachable; abstract Unix sockets are per namespace too), its
    working folder made and given to its uid, then that uid (no capability left), the
    parent-death signal again (a uid change clears it), non-dumpable (its /proc files are
    no longer its own: it cannot reset its peak memory, and no process of its uid may
    trace it), its limits, and the seccomp filter with no_new_privs.
    """

    confined = uid is not None
    try:
        unshare(CLONE_NEWNET)
    except OSError:
        confined = False
    os.makedirs(workdir, mode=0o700, exist_ok=True)
    parent = os.getppid()
    if uid is not None:
        os.chown(workdir, uid, uid)
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        resource.setrlimit(resource.RLIMIT_NPROC, (LEARNER_THREADS, LEARNER_THREADS))
    _linux.die_with_parent()
    if os.getppid() != parent:  # the driver died before the signal was asked for again
        os._exit(1)
    _check(_libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(DUMPABLE)")
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    memory = int(limits["memory_bytes"])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    cpu = max(1, math.ceil(float(limits["cpu_seconds"])))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    scratch = int(limits.get("scratch_bytes", DEFAULT_SCRATCH_BYTES))
    resource.setrlimit(resource.RLIMIT_FSIZE, (scratch, scratch))
    os.setpriority(os.PRIO_PROCESS, 0, int(limits.get("nice", 0)))
    seccomp.install()
    return confined
