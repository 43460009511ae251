"""The warm forkserver: imports torch and everything DDP needs once, then forks a leader per run.

Started by `pool.Pool` as `python -m app.verify.zygote FD` with a scrubbed
environment. It preloads, freezes the heap out of the garbage collector's reach
(so a rank's gc pass costs microseconds, not 100+ ms), says "ready" on FD and
then waits for requests: each is one SOCK_SEQPACKET message carrying the run's
control socket and rank pipes as SCM_RIGHTS. It exits when the engine closes FD.
Nothing here ever runs a tensor op: forking a process that has started OpenMP
threads can deadlock the child.
"""

from __future__ import annotations

import gc
import importlib
import os
import select
import socket
import sys

# Modules a typical snippet and DDP touch on first use; importing them here is
# what makes a run cost tens of milliseconds instead of seconds.
PRELOAD = (
    "torch",
    "torch.distributed",
    "torch.distributed.distributed_c10d",
    "torch.nn.parallel",
    "torch.nn.parallel.distributed",
    "torch.distributed.algorithms.join",
    "torch.distributed.algorithms.ddp_comm_hooks",
    "torch.distributed.algorithms.ddp_comm_hooks.default_hooks",
    "torch._dynamo",
    "torch.profiler._cupti_monitor",
    "torch.optim",
    "torch.nn.functional",
    "torch.utils.data",
    "torch.utils.data.distributed",
    "app.verify.harness",
    "app.verify.leader",
)
# Up to 8 ranks x 3 pipes, plus the control socket.
MAX_FDS = 32


def preload() -> None:
    for name in PRELOAD:
        importlib.import_module(name)
    gc.collect()
    gc.freeze()


def serve(sock: socket.socket) -> None:
    from app.verify.leader import leader_main

    me = os.getpid()
    while True:
        _reap()
        ready, _, _ = select.select([sock], [], [], 1.0)
        if not ready:
            continue
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 64, MAX_FDS)
        except (ConnectionError, OSError):
            return
        if not msg:
            return
        try:
            pid = os.fork()
        except OSError:
            pid = -1
        if pid == 0:
            sock.close()
            leader_main(fds, me)
        for fd in fds:  # the leader has its copies; a failed fork closes the run's channel
            os.close(fd)


def _reap() -> None:
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def main() -> None:
    sock = socket.socket(fileno=int(sys.argv[1]))
    preload()
    sys.stdout.flush()
    sys.stderr.flush()
    sock.send(f"ready {os.getpid()}".encode())
    serve(sock)


if __name__ == "__main__":
    main()
