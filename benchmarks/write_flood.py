"""One client bursts anonymous quiz creation: does another learner's answer stay fast?

    .venv/bin/python benchmarks/write_flood.py [--answers 60] [--rounds 3] [--flooders 2]
                                               [--fresh-cookies]

Starts `ddpdrill serve` (SQLite, no verify workers) on the fixture bank. A learner at
127.0.0.2 answers a question through the API (one answer every 25 ms), in rounds: on the
idle server, then while flooders at 127.0.0.1 post the quiz builder's form as fast as they can
(one cookie each, as in issue 36's attack; with --fresh-cookies a new cookie, and its CSRF
token, for every quiz). Prints the learner's answer p50 and p95 idle and flooded, their
ratio (target: p95 within 1.5x idle), and how many quizzes the flood made and how many it
was refused (429).
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing
import re
import statistics
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any

from _http import REPO, JsonClient, percentile, running_server

BANK = REPO / "tests" / "fixtures" / "bank"
TARGET_RATIO = 1.5
TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')


class Flooder(multiprocessing.Process):
    """Posts the quiz builder's form from 127.0.0.1 until told to stop: a process of its own,
    so the measuring learner's client never waits for its GIL."""

    def __init__(self, port: int, fresh: bool, stop: Any) -> None:
        super().__init__(daemon=True)
        self.port, self.fresh, self.stop = port, fresh, stop
        self.counts = multiprocessing.Array("i", 2)  # made, refused
        self.cookie = self.token = ""

    @property
    def made(self) -> int:
        return int(self.counts[0])

    @property
    def refused(self) -> int:
        return int(self.counts[1])

    def _conn(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=60,
                                          source_address=("127.0.0.1", 0))

    def _new_identity(self, conn: http.client.HTTPConnection) -> None:
        conn.request("GET", "/topics")
        resp = conn.getresponse()
        page = resp.read().decode()
        self.cookie = (resp.getheader("set-cookie") or "").split(";")[0]
        match = TOKEN.search(page)
        assert match, "no CSRF token on /topics"
        self.token = match.group(1)

    def run(self) -> None:
        conn = self._conn()
        self._new_identity(conn)
        while not self.stop.is_set():
            if self.fresh and self.made + self.refused:
                self._new_identity(conn)
            body = urllib.parse.urlencode({"csrf_token": self.token, "topics": "basics",
                                           "count": "5"})
            conn.request("POST", "/quizzes", body=body, headers={
                "Content-Type": "application/x-www-form-urlencoded", "Cookie": self.cookie})
            resp = conn.getresponse()
            resp.read()
            if resp.status == 303:
                self.counts[0] += 1
            elif resp.status == 429:
                self.counts[1] += 1
            else:
                raise AssertionError(f"quiz form answered {resp.status}")


class Learner(JsonClient):
    def __init__(self, port: int) -> None:
        super().__init__(port)
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60,
                                               source_address=("127.0.0.2", 0))

    def answers(self, n: int) -> list[float]:
        self.request("GET", "/healthz")  # connected (and given a cookie) before timing
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            status, _ = self.request("POST", "/api/v1/questions/fixture-single/attempts",
                                     {"answer": "b"})
            times.append((time.perf_counter() - t0) * 1000)
            assert status == 200, status
            time.sleep(0.025)
        return times


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--answers", type=int, default=60, help="per phase")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--flooders", type=int, default=2)
    parser.add_argument("--fresh-cookies", action="store_true")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ddpdrill-bench-writes-"))
    env: dict[str, str | None] = {
        "DDPDRILL_DATA_DIR": str(tmp / "data"), "DDPDRILL_BANK_DIR": str(BANK),
        "DDPDRILL_DATABASE_URL": None, "DDPDRILL_WORKERS": "0"}
    idle: list[float] = []
    flooded: list[float] = []
    flooders: list[Flooder] = []
    with running_server(env) as port:
        Learner(port).answers(20)  # warm
        # Idle and flooded phases alternate, so a slow spell of the (shared) machine falls on
        # both; each phase is a new learner (one learner's answers are limited too).
        for _ in range(args.rounds):
            idle += Learner(port).answers(args.answers)
            stop = multiprocessing.Event()
            burst = [Flooder(port, args.fresh_cookies, stop) for _ in range(args.flooders)]
            for f in burst:
                f.start()
            time.sleep(0.5)  # the burst is under way
            flooded += Learner(port).answers(args.answers)
            stop.set()
            for f in burst:
                f.join(timeout=60)
            flooders += burst
    made, refused = sum(f.made for f in flooders), sum(f.refused for f in flooders)
    print(f"flood: {args.flooders} clients at 127.0.0.1 "
          f"({'a fresh cookie per quiz' if args.fresh_cookies else 'one cookie each'}): "
          f"{made} quizzes made, {refused} refused (429)")
    a95, b95 = percentile(idle, 95), percentile(flooded, 95)
    print(f"another learner's answer: idle p50 {statistics.median(idle):.1f} ms p95 {a95:.1f} ms, "
          f"flooded p50 {statistics.median(flooded):.1f} ms p95 {b95:.1f} ms, "
          f"p95 ratio {b95 / a95:.2f} (target <= {TARGET_RATIO:g}: "
          f"{'met' if b95 <= TARGET_RATIO * a95 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
