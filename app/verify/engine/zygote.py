"""The warm forkserver: imports torch and everything DDP needs once, then forks a leader per run.

Started by `pool.Pool` as `python -m app.verify.engine.zygote FD sandbox|no-sandbox`
with a scrubbed environment. Unless told otherwise it first moves into the
namespace sandbox (sandbox.py), then preloads, freezes the heap out of the garbage collector's reach
(so that a rank's collections do not walk the imported modules), says "ready" on FD and
then waits for requests: each is one SOCK_SEQPACKET message carrying the run's
control socket and rank pipes as SCM_RIGHTS, for which it forks the run's leader.
It exits when the engine closes FD.
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
from pathlib import Path

from app.verify.engine import _linux, sandbox

# Modules a typical snippet and DDP touch on first use: imported here once, not in every rank.
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
    # ZeroRedundancyOptimizer and friends: seconds to import cold.
    "torch.distributed.optim",
    "torch.nn.functional",
    "torch.utils.data",
    "torch.utils.data.distributed",
    # The pipeline probe patches its stages; checkpointing takes 0.2 s to import cold.
    "torch.distributed.pipelining",
    "torch.distributed.checkpoint",
    # What the large-model round's snippets import on top (counted over the bank's snippets
    # with sys.modules): CommDebugMode and the memory trackers behind it, the FLOP counter,
    # DCP's state-dict helpers and its fsspec file system.
    "torch.distributed.tensor.debug",
    "torch.utils.flop_counter",
    "torch.utils.module_tracker",
    "torch.utils.serialization",
    "torch.distributed.checkpoint.state_dict",
    "torch.distributed.checkpoint._fsspec_filesystem",
    "app.verify.engine.harness",
    "app.verify.engine.leader",
    "app.verify.engine.driver",
)


def preload() -> None:
    # With the cyclic collector on: turned off, the garbage it then frees all at once leaves
    # holes all over the heap, which each rank's new objects fill, copying those pages from
    # the forkserver.
    for name in PRELOAD:
        importlib.import_module(name)
    import torch._dynamo.trace_rules

    from app.verify.engine.probes import c10d, collectives, pipeline

    c10d.register()
    collectives.precompute()
    pipeline.precompute()
    # init_process_group empties these caches in every rank (so that they pick up the
    # distributed rules); emptied here, each rank does not free (and so copy) the tables the
    # imports built.
    torch._dynamo.trace_rules.clear_lru_cache()
    gc.collect()
    gc.freeze()


def serve(sock: socket.socket) -> None:
    """Fork a leader for each run the engine sends, until the engine closes the socket."""
    from app.verify.engine.leader import MAX_FDS, leader_main

    me = os.getpid()
    leaders: set[int] = set()
    while True:
        for pid, status in _reap().items():
            if pid in leaders:
                leaders.discard(pid)
                if status != 0 and sandbox.active:
                    # A leader that did not finish its sweep (killed, crashed) may
                    # have left processes of its run behind, now orphaned to us.
                    sandbox.kill_run(pid)
        ready, _, _ = select.select([sock], [], [], 1.0)
        if not ready:
            continue
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 64, MAX_FDS)
        except OSError:
            msg, fds = b"", []
        if not msg:  # the engine is gone
            _reap()
            return
        try:
            pid = os.fork()
        except OSError:
            pid = -1
        if pid == 0:
            sock.close()
            leader_main(fds, me)
        if pid > 0:
            leaders.add(pid)
        for fd in fds:  # the leader has its copies; a failed fork closes the run's channel
            os.close(fd)


def _reap() -> dict[int, int]:
    """Reap every exited child; their exit statuses (-signal if killed) by pid."""
    dead: dict[int, int] = {}
    try:
        while True:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if not pid:
                break
            dead[pid] = os.waitstatus_to_exitcode(status)
    except ChildProcessError:
        pass
    return dead


def main() -> None:
    _linux.set_name("ddp-forkserver")
    sock = socket.socket(fileno=int(sys.argv[1]))
    if sys.argv[2:3] != ["no-sandbox"]:
        try:
            # Returns in the sandboxed forkserver (PID 1 of its own namespace).
            sandbox.enter(sock, Path(__file__).resolve().parents[2])
        except OSError as exc:
            sock.send(f"error the sandbox is unavailable: {exc}".encode())
            sys.exit(1)
    preload()
    sys.stdout.flush()
    sys.stderr.flush()
    sock.send(f"ready {os.getpid()}".encode())
    serve(sock)


if __name__ == "__main__":
    main()
