"""POST /api/v1/plan through HTTP against a running `ddpdrill serve`, and the planner's own
arithmetic in-process, to show where the time goes.

Sends 1,000 plans (after 100 to warm up), each a different layout drawn from the presets'
sizes, over one keep-alive connection, and times each round trip; then evaluates the same
plans in this process (pydantic validation, every formula, the contract's model) without HTTP.

Target on a 2-core machine: p50 <= 20 ms through HTTP.
Usage: .venv/bin/python benchmarks/plan_api.py
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _http import JsonClient, percentile, running_server

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from app.planner.schemas import PlanIn  # noqa: E402
from app.planner.service import plan  # noqa: E402

TARGET_P50_MS = 20.0
WARM_UP = 100
REQUESTS = 1_000


def layouts(n: int, seed: int = 40) -> list[dict[str, Any]]:
    """n valid layouts of the presets' sizes on 8 to 16,384 GPUs."""
    rng = random.Random(seed)
    models = [(8.03e9, 32, 4096, 32), (70.6e9, 80, 8192, 64), (405e9, 126, 16384, 128),
              (46.7e9, 32, 4096, 32)]
    out = []
    for _ in range(n):
        params, layers, hidden, heads = rng.choice(models)
        tp = rng.choice([1, 2, 4, 8])
        pp = rng.choice([p for p in (1, 2, 3, 6, 7, 9, 14, 18) if layers % p == 0])
        dp = rng.choice([1, 2, 8, 16, 64, 128])
        mb = rng.choice([1, 2])
        out.append({
            "model": {"params": params, "layers": layers, "hidden": hidden, "heads": heads,
                      "seq_len": rng.choice([4096, 8192])},
            "cluster": {"gpus": dp * tp * pp, "gpus_per_node": 8, "gpu_memory_gb": 80,
                        "peak_tflops": 989, "mtbf_hours": 50_000},
            "layout": {"dp": dp, "zero_stage": rng.randrange(4), "tp": tp, "pp": pp, "micro_batch": mb,
                       "global_batch": dp * mb * rng.choice([4, 16, 64]),
                       "sequence_parallel": rng.random() < 0.5,
                       "recompute": rng.choice(["none", "selective", "full"]),
                       "interleave": rng.choice([1, 2])},
            "training": {"tokens": 15e12, "mfu": 0.4, "checkpoint_seconds": 60},
        })
    return out


def main() -> int:
    bodies = layouts(WARM_UP + REQUESTS)
    tmp = Path(tempfile.mkdtemp(prefix="ddpdrill-bench-plan-"))
    # The default SQLite file in a scratch data folder (serve migrates it), no bank, no workers.
    env: dict[str, str | None] = {
        "DDPDRILL_DATABASE_URL": None, "DDPDRILL_DATA_DIR": str(tmp / "data"),
        "DDPDRILL_LOAD_BANK_ON_START": "false", "DDPDRILL_WORKERS": "0",
    }
    with running_server(env) as port:
        client = JsonClient(port)
        times = []
        for i, body in enumerate(bodies):
            start = time.perf_counter()
            status, answer = client.request("POST", "/api/v1/plan", body)
            elapsed = (time.perf_counter() - start) * 1000
            assert status == 200 and "memory" in answer, (status, answer)
            if i >= WARM_UP:
                times.append(elapsed)
    inproc = []
    for body in bodies[WARM_UP:]:
        start = time.perf_counter()
        plan(request=PlanIn.model_validate(body)).model_dump()
        inproc.append((time.perf_counter() - start) * 1000)
    p50 = percentile(times, 50)
    print(f"POST /api/v1/plan over HTTP, {REQUESTS} layouts: p50 {p50:.2f} ms, "
          f"p90 {percentile(times, 90):.2f} ms, p99 {percentile(times, 99):.2f} ms "
          f"(target p50 <= {TARGET_P50_MS:.0f} ms: {p50 / TARGET_P50_MS:.2f}x of it)")
    print(f"the same plans in-process (validate, evaluate, the contract's model): "
          f"p50 {percentile(inproc, 50) * 1000:.0f} µs, "
          f"{percentile(inproc, 50) / p50:.1%} of the HTTP round trip")
    return 0 if p50 <= TARGET_P50_MS else 1


if __name__ == "__main__":
    sys.exit(main())
