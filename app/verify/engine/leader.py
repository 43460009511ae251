"""The leader of one run: a fork of the forkserver that owns the run's session and its ranks.

It makes its own session (the run's) and becomes a child subreaper, so that
anything a snippet spawns stays in its tree, and forks the run's ranks. It hosts
the rendezvous store (as
torchrun's agent does), reports each rank's exit to the runner as it happens, and
on the runner's word (the time limit) or when the runner disappears it
dumps the ranks' Python stacks and kills them. Finally it kills every descendant
left over and removes the run's folder.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import select
import shutil
import signal
import socket
import sys
import tempfile
import time
import traceback
from typing import Any, NoReturn

import torch.distributed as dist

from app.verify.engine import _linux, driver, harness, sandbox

# How long the ranks get to write their Python stacks before SIGKILL.
STACK_DUMP_WAIT_S = 0.2
MAX_STACK_CHARS = 8000
# Leftover processes are killed and reaped until none remain, for at most this long.
SWEEP_S = 3.0
SPEC_WAIT_S = 30.0
# Up to 8 ranks x 3 pipes, plus the control socket.
MAX_FDS = 32
_STORES: list[object] = []


class _Channel:
    """JSON lines over the control socket to the runner."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""
        self.open = True

    def send(self, **msg: Any) -> None:
        if not self.open:
            return
        try:
            self.sock.sendall((json.dumps(msg) + "\n").encode())
        except OSError:
            self.open = False

    def read_lines(self) -> list[dict[str, Any]] | None:
        """Messages now available; None once the runner has closed its end."""
        data = self.sock.recv(65536)
        if not data:
            self.open = False
            return None
        self.buf += data
        *lines, self.buf = self.buf.split(b"\n")
        return [json.loads(line) for line in lines if line.strip()]


def leader_main(fds: list[int], zygote_pid: int) -> NoReturn:
    """Entry point of a leader forked for a run already waiting; never returns."""
    status = 0
    try:
        if _become_leader(zygote_pid):
            _lead(fds)
    except BaseException:
        status = 1  # the forkserver then kills whatever of the run may be left
        traceback.print_exc()
        sys.stderr.flush()
    os._exit(status)


def _become_leader(zygote_pid: int) -> bool:
    _linux.set_name("ddp-leader")
    _linux.die_with_parent()
    if os.getppid() != zygote_pid:
        return False
    os.setsid()
    _linux.become_subreaper()
    if sandbox.active:
        # Before any rank is forked: they must all see this run's scratch folder.
        sandbox.enter_run(os.getpid())
    return True


def _read_spec(channel: _Channel) -> dict[str, Any] | None:
    deadline = time.monotonic() + SPEC_WAIT_S
    while time.monotonic() < deadline:
        ready, _, _ = select.select([channel.sock], [], [], deadline - time.monotonic())
        if not ready:
            break
        lines = channel.read_lines()
        if lines is None:
            return None
        if lines:
            return lines[0]
    return None


def _lead(fds: list[int]) -> None:
    channel = _Channel(socket.socket(fileno=fds[0]))
    spec = _read_spec(channel)
    if spec is None:
        return
    world_size = int(spec["world_size"])
    rank_fds = fds[1:]
    if len(rank_fds) != 3 * world_size:
        channel.send(type="error", message=f"expected {3 * world_size} rank pipes, got {len(rank_fds)}")
        return
    if sandbox.active:
        # The run's own tmpfs: it disappears with the run's last process.
        workdir = sandbox.SCRATCH_DIR
        scratch = int(spec["limits"].get("scratch_bytes", sandbox.DEFAULT_SCRATCH_BYTES))
        if scratch != sandbox.DEFAULT_SCRATCH_BYTES:
            sandbox.resize_scratch(scratch)
        leftovers = _run(spec, world_size, rank_fds, workdir, channel)
    else:
        workdir = tempfile.mkdtemp(prefix="ddpdrill-run-")
        try:
            leftovers = _run(spec, world_size, rank_fds, workdir, channel)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    # Only now: when the runner hears "done", nothing of the run remains.
    channel.send(type="done", leftovers=leftovers, t=time.monotonic_ns())


def _run(spec: dict[str, Any], world_size: int, rank_fds: list[int], workdir: str,
         channel: _Channel) -> int:
    """Start the ranks, supervise them, sweep; return how many leftover processes were killed."""
    me = os.getpid()
    # The rendezvous store listens on a socket bound before the ranks run, so
    # there is no window in which another process could take its port.
    listener = socket.create_server(("127.0.0.1", 0), backlog=64)
    port = listener.getsockname()[1]
    with open(os.path.join(workdir, harness.SNIPPET_FILE), "w") as f:
        f.write(spec["code"])
    if spec.get("shared_folder"):
        # The folder an exercise's learner processes share (each owns what it writes in it).
        shared = os.path.join(workdir, driver.SHARED_DIR)
        os.mkdir(shared)
        os.chmod(shared, 0o1777)
    pids: dict[int, int] = {}
    error = None
    for rank in range(world_size):
        fds = (rank_fds[3 * rank], rank_fds[3 * rank + 1], rank_fds[3 * rank + 2])
        try:
            pid = os.fork()
        except OSError as exc:
            error = f"could not fork rank {rank}: {exc}"
            break
        if pid == 0:
            listener.close()
            harness.rank_main(spec, rank, fds, port, workdir, me)
        pids[pid] = rank
    for fd in rank_fds:
        os.close(fd)
    if error is None:
        # The leader hosts the store, like torchrun's agent: it outlives every rank, so
        # a rank that exits early does not take the rendezvous (new_group) with it.
        # Created only now: its server thread must not exist when ranks fork.
        try:
            _host_store(listener, world_size, float(spec["limits"]["pg_timeout_s"]))
        except Exception as exc:
            error = f"could not start the rendezvous store: {exc}"
    if error is not None:
        channel.send(type="error", message=error)
        for pid in pids:
            _signal(pid, signal.SIGKILL)
    else:
        channel.send(type="started", leader=me, port=port,
                     pids=[pid for pid, _ in sorted(pids.items(), key=lambda kv: kv[1])])
    _supervise(pids, workdir, channel)
    return _sweep(me)


def _host_store(listener: socket.socket, world_size: int, timeout_s: float) -> None:
    port = listener.getsockname()[1]
    fd = listener.detach()  # the store owns the listening socket from here on
    # Kept alive until the leader's os._exit: destroying it would join its thread.
    _STORES.append(dist.TCPStore("127.0.0.1", port, world_size, True,
                                 datetime.timedelta(seconds=timeout_s),
                                 wait_for_workers=False, master_listen_fd=fd))


def _supervise(pids: dict[int, int], workdir: str, channel: _Channel) -> None:
    poller = select.poll()
    live: dict[int, int] = {}
    for pid in pids:
        pidfd = os.pidfd_open(pid)
        live[pidfd] = pid
        poller.register(pidfd, select.POLLIN)
    ctrl_fd = channel.sock.fileno()
    poller.register(ctrl_fd, select.POLLIN)
    killed: set[int] = set()
    while live:
        for fd, _ in poller.poll():
            if fd == ctrl_fd:
                try:
                    lines = channel.read_lines()
                except (OSError, ValueError):
                    lines = None
                if lines is None:  # the runner is gone: stop everything, no stacks
                    poller.unregister(ctrl_fd)
                    killed |= _kill(set(live.values()), pids, workdir, dump_stacks=False)
                else:
                    for m in lines:
                        if m.get("type") == "secret":
                            _write_secret(workdir, m)
                    if any(m.get("type") == "kill" for m in lines):
                        killed |= _kill(set(live.values()), pids, workdir, dump_stacks=True)
                continue
            pid = live.pop(fd)
            poller.unregister(fd)
            os.close(fd)
            _, status, usage = os.wait4(pid, 0)
            now = time.monotonic_ns()
            rank = pids[pid]
            channel.send(type="exit", rank=rank, t=now, code=os.waitstatus_to_exitcode(status),
                         killed=pid in killed, cpu_s=usage.ru_utime + usage.ru_stime,
                         maxrss_kb=usage.ru_maxrss,
                         stack=_read_stack(workdir, rank) if pid in killed else None)


def _write_secret(workdir: str, msg: dict[str, Any]) -> None:
    """What the runner held back until every rank (and its learner process) existed: readable
    by the ranks (the run's uid) only, never by a learner process (driver.py)."""
    path = os.path.join(workdir, driver.REFERENCE_FILE)
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        if sandbox.active:
            os.fchown(fd, sandbox.run_uid(os.getpid()), sandbox.run_uid(os.getpid()))
        os.write(fd, json.dumps({"reference": msg.get("reference")}).encode())
    finally:
        os.close(fd)
    os.rename(tmp, path)


def _kill(targets: set[int], pids: dict[int, int], workdir: str, *, dump_stacks: bool) -> set[int]:
    if dump_stacks:
        for pid in targets:
            _signal(pid, signal.SIGUSR1)
        deadline = time.monotonic() + STACK_DUMP_WAIT_S
        pending = set(targets)
        while pending and time.monotonic() < deadline:
            pending = {p for p in pending if not _stack_written(workdir, pids[p])}
            time.sleep(0.005)
    for pid in targets:
        _signal(pid, signal.SIGKILL)
    return targets


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _stack_path(workdir: str, rank: int) -> str:
    return os.path.join(workdir, harness.STACK_FILE.format(rank=rank))


def _stack_written(workdir: str, rank: int) -> bool:
    try:
        return os.path.getsize(_stack_path(workdir, rank)) > 0
    except OSError:
        return True  # no file: nothing to wait for


def _read_stack(workdir: str, rank: int) -> str | None:
    try:
        with open(_stack_path(workdir, rank), errors="replace") as f:
            text = f.read(MAX_STACK_CHARS)
    except OSError:
        return None
    return text or None


def _sweep(me: int) -> int:
    """Kill and reap every remaining descendant (they reparent to us); return how many the
    snippet left (an exercise's learner processes, which end with their ranks, do not count)."""
    seen: set[int] = set()
    deadline = time.monotonic() + SWEEP_S
    while time.monotonic() < deadline:
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            return len(seen)
        for pid in _linux.children_of(me):
            if not _linux.name_of(pid).startswith(driver.LEARNER_NAME):
                seen.add(pid)
            _signal(pid, signal.SIGKILL)
        time.sleep(0.002)
    return len(seen)
