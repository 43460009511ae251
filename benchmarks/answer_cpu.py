"""An answer's CPU in the web process: the ASGI app called directly, no server, no client.

    .venv/bin/python benchmarks/answer_cpu.py [--answers 900] [--profile FILE]

Makes the app as `ddpdrill serve` does (`create_app(freeze_heap=True)`; the fixture bank, a
fresh SQLite file, no run workers), then sends API answers (`POST
/api/v1/questions/{slug}/attempts`) one after the other: --answers / 3 learners, each with an
address of its own, answer the fixture bank's three questions in turn (the first answer of
each without a cookie: it makes the learner). Prints wall and CPU milliseconds an answer (the
process's CPU, all its threads).
One web process serves every request, so this CPU bounds the answers a second that
benchmarks/load.py measures. --profile writes a cProfile of the answers, with the views run
on the event loop's thread instead of the pool (cProfile sees one thread), for `pstats`.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

from _http import REPO

FIXTURE_BANK = REPO / "tests" / "fixtures" / "bank"
ANSWERS = {"fixture-single": "b", "fixture-numeric": "1400", "fixture-trace-join": "a"}
WARM_UP = 5


class Learner:
    """One browser: an address and the learner cookie the app gives it."""

    def __init__(self, i: int) -> None:
        self.address = f"127.0.{1 + i // 250}.{1 + i % 250}"
        self.cookie: str | None = None

    async def answer(self, app: Any, slug: str) -> None:
        body = json.dumps({"answer": ANSWERS[slug]}).encode()
        path = f"/api/v1/questions/{slug}/attempts"
        headers = [(b"host", b"testserver"), (b"content-type", b"application/json"),
                   (b"content-length", str(len(body)).encode())]
        if self.cookie:
            headers.append((b"cookie", self.cookie.encode()))
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                 "method": "POST", "scheme": "http", "path": path, "raw_path": path.encode(),
                 "query_string": b"", "root_path": "", "headers": headers,
                 "client": (self.address, 5000), "server": ("testserver", 80), "state": {}}
        sent = False
        status = 0

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.Event().wait()  # the client never disconnects
            raise AssertionError

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                for key, value in message["headers"]:
                    if key == b"set-cookie":
                        self.cookie = value.decode().split(";")[0]

        await app(scope, receive, send)
        if status != 200:
            raise SystemExit(f"an answer to {slug} got {status}")


def run_views_inline() -> None:
    """Run the views on the event loop's thread, so that cProfile sees them."""
    import anyio.to_thread

    async def inline(func: Any, *args: Any, **_: Any) -> Any:
        return func(*args)

    anyio.to_thread.run_sync = inline  # type: ignore[assignment]


async def measure(answers: int, profile: str | None) -> None:
    from app.main import create_app

    app = create_app(freeze_heap=True)
    learners = [Learner(i) for i in range(WARM_UP + answers // len(ANSWERS))]
    async with app.router.lifespan_context(app):
        for learner in learners[:WARM_UP]:
            await learner.answer(app, "fixture-single")
        profiler = cProfile.Profile() if profile else None
        wall, cpu = time.perf_counter(), time.process_time()
        if profiler:
            profiler.enable()
        n = 0
        for slug in ANSWERS:
            for learner in learners[WARM_UP:]:
                await learner.answer(app, slug)
                n += 1
        if profiler:
            profiler.disable()
            profiler.dump_stats(profile)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"{n} answers: {wall / n * 1000:.2f} ms wall, {cpu / n * 1000:.2f} ms CPU an answer"
          + (" (profiled)" if profile else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--answers", type=int, default=900)
    parser.add_argument("--profile", default=None, help="write a cProfile here")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="answer-cpu-")
    os.environ.update(DDPDRILL_DATA_DIR=folder, DDPDRILL_BANK_DIR=str(FIXTURE_BANK),
                      DDPDRILL_WORKERS="0", DDPDRILL_DATABASE_URL="",
                      DDPDRILL_SECRET_KEY="answer-cpu-benchmark-secret-0123456789abcdef")
    subprocess.run([sys.executable, "-m", "app.cli", "bank", "import", str(FIXTURE_BANK)],
                   cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    sys.path.insert(0, str(REPO))
    if args.profile:
        run_views_inline()
    asyncio.run(measure(args.answers, args.profile))


if __name__ == "__main__":
    main()
