"""Verify through HTTP against a running server: cached and fresh latency.

Starts `ddpdrill serve` (SQLite, one in-process worker) on a free local port with
a small benchmark bank (a two-rank DDP step with a `seed` knob of 25 values, so
there are 25 distinct runs to make fresh), then measures:

- a cached verify: POST /api/v1/questions/{slug}/verify for knobs already run,
  p50 and p99 over 300 requests;
- a fresh verify end to end: POST, then poll GET /api/v1/runs/{id} until done,
  median of 20 distinct knob values.

Targets on a 2-core machine: cached p50 <= 10 ms, fresh p50 <= 250 ms.
Usage: .venv/bin/python benchmarks/verify_service.py
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from _http import JsonClient, percentile, running_server

REPO = Path(__file__).resolve().parent.parent
SLUG = "bench-ddp-step"
SNIPPET = """
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(params["seed"])
model = nn.Linear(8, 1, bias=False)
ddp = DDP(model)
ddp(torch.full((2, 8), float(rank + 1))).sum().backward()
report("grad_sum", float(model.weight.grad.sum()))
"""
QUESTION = f"""
slug: {SLUG}
topic: bench
title: Benchmark step
difficulty: 1
type: single
prompt: Benchmark question.
choices:
  - text: "yes"
    correct: true
  - text: "no"
explanation: Benchmark only.
explained:
  a: a benchmark question; its run is timed, not graded
  b: a benchmark question; its run is timed, not graded
verify:
  snippet: bench_step.py
  knobs:
    seed:
      values: [{", ".join(str(i) for i in range(25))}]
      default: 0
  expect:
    - label: it runs
      outcome: ok
"""


class Client(JsonClient):
    def verify(self, seed: int) -> dict:
        status, body = self.request("POST", f"/api/v1/questions/{SLUG}/verify",
                                    {"params": {"seed": seed}})
        assert status == 200, (status, body)
        return body

    def wait_done(self, run_id: int, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            _status, body = self.request("GET", f"/api/v1/runs/{run_id}")
            if body.get("status") in ("done", "failed"):
                return body
            time.sleep(0.005)
        raise TimeoutError(run_id)


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="ddpdrill-bench-"))
    bank = tmp / "bank" / "bench"
    bank.mkdir(parents=True)
    (bank / f"{SLUG}.yaml").write_text(QUESTION)
    (bank / "bench_step.py").write_text(SNIPPET)
    env: dict[str, str | None] = {
        "DDPDRILL_DATA_DIR": str(tmp / "data"), "DDPDRILL_BANK_DIR": str(tmp / "bank"),
        "DDPDRILL_VERIFY_RATE_PER_MINUTE": "100000", "DDPDRILL_WORKERS": "1",
        "DDPDRILL_DATABASE_URL": None}
    with running_server(env) as port:
        client = Client(port)
        # The first run pays for the forkserver's start; it is not what a learner sees after.
        first = client.verify(0)
        client.wait_done(first["run_id"])

        fresh = []
        for seed in range(1, 21):
            t0 = time.perf_counter()
            started = client.verify(seed)
            assert not started["cached"], started
            done = client.wait_done(started["run_id"])
            fresh.append((time.perf_counter() - t0) * 1000)
            assert done["status"] == "done" and done["result"]["outcome"] == "ok", done

        cached = []
        for i in range(300):
            t0 = time.perf_counter()
            body = client.verify(1 + i % 20)
            cached.append((time.perf_counter() - t0) * 1000)
            assert body["cached"] and body["status"] == "done"

    c50, c99, f50 = percentile(cached, 50), percentile(cached, 99), statistics.median(fresh)
    print(f"cached verify over HTTP: p50 {c50:.2f} ms, p99 {c99:.2f} ms (n={len(cached)})")
    print(f"fresh verify end to end: median {f50:.1f} ms, min {min(fresh):.1f}, "
          f"max {max(fresh):.1f} ms (n={len(fresh)})")
    print(f"cached p50 / target 10 ms = {c50 / 10:.2f}")
    print(f"fresh p50 / target 250 ms = {f50 / 250:.2f}")
    return 0 if c50 <= 10 and f50 <= 250 else 1


if __name__ == "__main__":
    raise SystemExit(main())
