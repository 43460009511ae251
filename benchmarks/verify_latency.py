"""Latency of one two-rank DDP step: a fresh `torchrun` per job against the warm verify engine.

    .venv/bin/python benchmarks/verify_latency.py [--torchrun-jobs 5] [--engine-runs 20]
                                                  [--no-sandbox-compare]

Both measure the wall time a caller waits for one job, from asking to having the
result. The two are interleaved so that a busy machine slows both alike. Prints
both medians and their ratio; the figures go in docs/performance.md.

The engine runs in its namespace sandbox (docs/sandbox.md). By default a second
engine with DDPDRILL_SANDBOX=off runs the same step, interleaved run by run, and
the ratio of the two medians is the sandbox's cost (the target is at most 1.10).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.verify.engine import Engine, Limits, torch_version

STEP = """
torch.manual_seed(0)
m = nn.Linear(2, 1, bias=False)
ddp = DDP(m)
ddp(torch.full((1, 2), float(rank + 1))).sum().backward()
assert m.weight.grad.tolist() == [[1.5, 1.5]]
"""
IMPORTS = """
import torch, torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
"""
# The same computation as a standalone torchrun script: it must set up and tear
# down the process group itself.
TORCHRUN_SCRIPT = IMPORTS + """
import torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
""" + STEP + """
del ddp
dist.destroy_process_group()
# As the engine's ranks do: torch 2.13 sometimes aborts at interpreter shutdown after DDP
# ("terminate called without an active exception"), which fails the torchrun job.
import os
os._exit(0)
"""
ENGINE_SNIPPET = IMPORTS + STEP


def torchrun_job(script: Path) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         str(script)],
        check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    return (time.perf_counter() - start) * 1000


def engine_job(engine: Engine, phases: dict[str, list[float]]) -> float:
    start = time.perf_counter()
    result = engine.run(ENGINE_SNIPPET, limits=Limits(timeout_s=30))
    elapsed = (time.perf_counter() - start) * 1000
    if result.outcome != "ok":
        raise SystemExit(f"engine run failed: {result.diagnosis}")

    def last(kind: str) -> float:
        return max(e["t_ms"] for r in result.ranks for e in r.events if e["kind"] == kind)

    marks = {"ranks started": last("started"), "gloo group ready": last("group_ready"),
             "snippet done": last("snippet_end"), "ranks exited": last("exit"),
             "result returned": elapsed}
    for name, t in marks.items():
        phases.setdefault(name, []).append(t)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torchrun-jobs", type=int, default=5)
    parser.add_argument("--engine-runs", type=int, default=20)
    parser.add_argument("--sandbox-compare", action=argparse.BooleanOptionalAction, default=True,
                        help="also time an engine without the sandbox, interleaved")
    args = parser.parse_args()

    engine = Engine()
    start = time.perf_counter()
    engine.start()
    startup_ms = (time.perf_counter() - start) * 1000
    phases: dict[str, list[float]] = {}
    first_ms = engine_job(engine, {})  # pages in what the forkserver has not touched yet
    bare = Engine(sandbox=False) if args.sandbox_compare else None
    unsandboxed: list[float] = []
    bare_phases: dict[str, list[float]] = {}
    if bare is not None:
        bare.start()
        engine_job(bare, {})

    fresh: list[float] = []
    warm: list[float] = []
    per_job = max(1, args.engine_runs // max(1, args.torchrun_jobs))
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "ddp_step.py"
        script.write_text(TORCHRUN_SCRIPT)
        while len(fresh) < args.torchrun_jobs or len(warm) < args.engine_runs:
            if len(fresh) < args.torchrun_jobs:
                fresh.append(torchrun_job(script))
            for _ in range(per_job):
                if len(warm) < args.engine_runs:
                    warm.append(engine_job(engine, phases))
                    if bare is not None:
                        unsandboxed.append(engine_job(bare, bare_phases))
    engine.close()
    if bare is not None:
        bare.close()

    def describe(xs: list[float]) -> str:
        q = statistics.quantiles(xs, n=10) if len(xs) >= 2 else xs
        return (f"median {statistics.median(xs):8.1f} ms  (min {min(xs):.1f}, "
                f"p90 {q[-1]:.1f}, max {max(xs):.1f}, n={len(xs)})")

    print(f"torch {torch_version()}, python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"engine forkserver start-up: {startup_ms:.0f} ms once; first run {first_ms:.1f} ms")
    print(f"(a) fresh torchrun --nproc_per_node=2: {describe(fresh)}")
    print(f"(b) warm verify engine, 2 ranks:       {describe(warm)}")
    if unsandboxed:
        print(f"(c) the same, DDPDRILL_SANDBOX=off:    {describe(unsandboxed)}")
    print(f"ratio (a)/(b) of medians: {statistics.median(fresh) / statistics.median(warm):.1f}x")
    if unsandboxed:
        print(f"sandbox cost, ratio (b)/(c) of medians: "
              f"{statistics.median(warm) / statistics.median(unsandboxed):.3f} (target <= 1.10)")
    print("engine run, median ms from the run's start (last rank)" +
          (", sandboxed / off:" if unsandboxed else ":"))
    for name, ts in phases.items():
        other = f" {statistics.median(bare_phases[name]):7.1f}" if unsandboxed else ""
        print(f"  {name:<16} {statistics.median(ts):7.1f}{other}")


if __name__ == "__main__":
    main()
