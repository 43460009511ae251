"""One address floods the exercise queue: does everyone else still get their results?

    .venv/bin/python benchmarks/queue_fairness.py [--runs 5] [--flood 30]

Starts `ddpdrill serve` (SQLite, the default workers) with a small bank: an exercise
(two ranks, 10 s limit) and a question whose `seed` knob has 40 values (each a fresh
Verify). Measures, first on an idle server, then with --flood spinning submissions
(`while True: pass`, each from a fresh cookie) sent from one address (127.0.0.1):

- a different learner's exercise run, from another address (127.0.0.2), through HTTP
  from POST to every check evaluated;
- a fresh Verify (a seed no one ran), from that other address, POST to done.

Prints the medians, the ratio loaded / idle (issue 23's target: each within 2x), and how
many flood submissions the server accepted and refused (the per-address cap, 429).
"""

from __future__ import annotations

import argparse
import http.client
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from _http import REPO, JsonClient, running_server

SLUG = "bench-fresh-verify"
SNIPPET = """\
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
topic: drills
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
      values: [{", ".join(str(i) for i in range(40))}]
      default: 0
  expect:
    - label: it runs
      outcome: ok
"""
EXERCISE = REPO / "tests" / "fixtures" / "exercise_bank" / "drills"
SPIN = "while True:\n    pass\n"
TARGET_RATIO = 2.0


class Browser(JsonClient):
    """A learner from a given local address (127.0.0.x), with a cookie of its own."""

    def __init__(self, port: int, source: str) -> None:
        super().__init__(port)
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60,
                                               source_address=(source, 0))

    def exercise(self, code: str, timeout: float = 120) -> float:
        t0 = time.perf_counter()
        status, started = self.request("POST", "/api/v1/exercises/fixture-exercise/run", {"code": code})
        assert status == 200, (status, started)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            _status, body = self.request("GET", started["url"])
            if body.get("status") == "done":
                assert body["passed"], body
                return (time.perf_counter() - t0) * 1000
            time.sleep(0.005)
        raise TimeoutError(started)

    def fresh_verify(self, seed: int, timeout: float = 120) -> float:
        t0 = time.perf_counter()
        status, body = self.request("POST", f"/api/v1/questions/{SLUG}/verify", {"params": {"seed": seed}})
        assert status == 200 and not body["cached"], (status, body)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            _status, run = self.request("GET", body["url"])
            if run.get("status") == "done":
                return (time.perf_counter() - t0) * 1000
            time.sleep(0.005)
        raise TimeoutError(body)


def measure(port: int, runs: int, seeds: list[int]) -> tuple[list[float], list[float]]:
    solution = (EXERCISE / "solution.py").read_text()
    exercise, verify = [], []
    for i in range(runs):
        learner = Browser(port, "127.0.0.2")
        learner.request("GET", "/healthz")  # connected before the clock starts, as a browser is
        # A comment makes the code new, so the run is never a cache hit.
        exercise.append(learner.exercise(f"{solution}\n# learner {time.time_ns()} {i}\n"))
        verify.append(learner.fresh_verify(seeds.pop()))
    return exercise, verify


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--flood", type=int, default=30)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ddpdrill-bench-fair-"))
    bank = tmp / "bank"
    shutil.copytree(EXERCISE, bank / "drills")
    (bank / "drills" / f"{SLUG}.yaml").write_text(QUESTION)
    (bank / "drills" / "bench_step.py").write_text(SNIPPET)
    env: dict[str, str | None] = {
        "DDPDRILL_DATA_DIR": str(tmp / "data"), "DDPDRILL_BANK_DIR": str(bank),
        "DDPDRILL_DATABASE_URL": None, "DDPDRILL_EXERCISE_RATE_PER_MINUTE": "100000",
        "DDPDRILL_VERIFY_RATE_PER_MINUTE": "100000"}
    seeds = list(range(1, 40))
    with running_server(env) as port:
        # Warm: the forkserver starts, the import's prefill runs.
        measure(port, 2, seeds)
        idle_ex, idle_verify = measure(port, args.runs, seeds)
        accepted = refused = 0
        for _ in range(args.flood):
            status, _ = Browser(port, "127.0.0.1").request(
                "POST", "/api/v1/exercises/fixture-exercise/run", {"code": SPIN})
            accepted += status == 200
            refused += status == 429
        time.sleep(1)  # the spinners are executing now
        load_ex, load_verify = measure(port, args.runs, seeds)
    print(f"flood: {args.flood} spinning submissions from one address: {accepted} accepted, "
          f"{refused} refused (429)")
    for name, idle, loaded in (("another learner's exercise run", idle_ex, load_ex),
                               ("a fresh Verify", idle_verify, load_verify)):
        a, b = statistics.median(idle), statistics.median(loaded)
        verdict = "met" if b <= TARGET_RATIO * a else "NOT met"
        print(f"{name}: idle p50 {a:.0f} ms, flooded p50 {b:.0f} ms, ratio {b / a:.2f} "
              f"(target <= {TARGET_RATIO:g}: {verdict})")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
