"""What an output flood costs a run: a quiet snippet against the same snippet printing a lot.

    .venv/bin/python benchmarks/output_flood.py [--mib 200] [--runs 5]

Rank 0 writes MIB mebibytes to stdout in 1 MiB writes; the engine keeps the first
`output_bytes` and reads the rest to throw it away. The quiet and flooding runs
are interleaved on one warm engine so that a busy machine slows both alike.
Prints both medians, the extra time per GiB drained, their ratio, and the size of
the flooded run's result as JSON.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.verify.engine import Engine, Limits

SNIPPET = """
import sys
import torch.distributed as dist
if rank == 0:
    chunk = "x" * 2**20
    for _ in range(params["mib"]):
        sys.stdout.write(chunk)
dist.barrier()
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=200, help="MiB rank 0 writes to stdout")
    parser.add_argument("--runs", type=int, default=5, help="runs of each kind")
    args = parser.parse_args()
    limits = Limits(timeout_s=120)
    engine = Engine()
    engine.start()
    quiet: list[float] = []
    flood: list[float] = []
    size = 0
    try:
        engine.run(SNIPPET, world_size=2, params={"mib": 0}, limits=limits)  # warm-up
        for _ in range(args.runs):
            q = engine.run(SNIPPET, world_size=2, params={"mib": 0}, limits=limits)
            f = engine.run(SNIPPET, world_size=2, params={"mib": args.mib}, limits=limits)
            assert (q.outcome, f.outcome) == ("ok", "ok"), (q.diagnosis, f.diagnosis)
            assert f.ranks[0].stdout_bytes == args.mib * 2**20
            quiet.append(q.timings["wall_ms"])
            flood.append(f.timings["wall_ms"])
            size = len(f.model_dump_json())
    finally:
        engine.close()
    q_ms, f_ms = statistics.median(quiet), statistics.median(flood)
    print(f"quiet run:            median {q_ms:8.1f} ms over {args.runs} runs")
    print(f"{args.mib} MiB stdout flood: median {f_ms:8.1f} ms over {args.runs} runs")
    print(f"extra per GiB drained: {(f_ms - q_ms) * 1024 / args.mib:8.1f} ms")
    print(f"flood / quiet:         {f_ms / q_ms:8.2f}x")
    print(f"flooded result JSON:   {size:,} bytes")


if __name__ == "__main__":
    main()
