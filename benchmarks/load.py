"""A class at once: the real server against a bare FastAPI endpoint, 64 clients each.

    .venv/bin/python benchmarks/load.py [--clients 64] [--seconds 5] [--warmup 1] [--rounds N]
                                        [--database-url URL] [--processes N]

Starts `ddpdrill serve` (the fixture bank, one in-process worker) and, in the same
run, a bare FastAPI app with one endpoint that parses a small JSON body and returns
JSON, under the same uvicorn settings. Then, for each workload in turn, 64 clients
(each its own connection and cookies, as browsers have) send requests back to back,
--warmup seconds untimed and then --seconds timed: the bare endpoint, API answer
submits, HTML answer submits (the form post a browser makes, answered with the graded
page) and cached Verify requests.
Prints throughput, p50 and p99 for each and its throughput as a share of the bare
endpoint's. Without --database-url the server uses a fresh SQLite file; with one
(PostgreSQL) it uses that database, which must be migrated (`ddpdrill db upgrade`)
and is loaded with the fixture bank if empty. --processes N runs `serve --processes N`
(PostgreSQL only) and the bare endpoint as N uvicorn workers too. Figures go in
docs/performance.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path

from _http import free_port

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.loadclient import Client, Reply, Timings, csrf_of  # noqa: E402

FIXTURE_BANK = REPO / "tests" / "fixtures" / "bank"
ANSWERS = {"fixture-single": "b", "fixture-numeric": "1400", "fixture-trace-join": "a"}
BARE_APP = '''
from fastapi import FastAPI
from pydantic import BaseModel

app = FastAPI()


class Body(BaseModel):
    answer: str


@app.post("/bare")
def bare(body: Body) -> dict[str, object]:
    return {"answer": body.answer, "correct": True}
'''


def wait_up(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{url} exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError as exc:
            if getattr(exc, "code", None):  # an HTTP error: the server is up
                return
            time.sleep(0.1)
    raise SystemExit(f"{url} did not start")


def start_server(folder: Path, database_url: str | None,
                 processes: int) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, "DDPDRILL_DATA_DIR": str(folder / "data"),
           "DDPDRILL_BANK_DIR": str(FIXTURE_BANK), "DDPDRILL_WORKERS": "1"}
    if database_url:
        env["DDPDRILL_DATABASE_URL"] = database_url
        subprocess.run([sys.executable, "-m", "app.cli", "bank", "import", str(FIXTURE_BANK)],
                       cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL)
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--port", str(port),
                             "--processes", str(processes)],
                            cwd=REPO, env=env, stdout=open(folder / "server.log", "wb"),  # noqa: SIM115
                            stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    wait_up(url + "/healthz", proc)
    return proc, url


def start_bare(folder: Path, processes: int) -> tuple[subprocess.Popen[bytes], str]:
    (folder / "bare_app.py").write_text(BARE_APP)
    port = free_port()
    # The same uvicorn settings `ddpdrill serve` uses: uvicorn.run(app, host, port,
    # log_level="info"), or app.webprocs.serve_processes (a listening socket per process)
    # as `serve --processes` runs it.
    code = ("import sys, uvicorn; sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[4]); "
            "from app.webprocs import reserve, serve_processes; n, port = int(sys.argv[3]), "
            "int(sys.argv[2]); serve_processes('bare_app:app', reserve('127.0.0.1', port), "
            "processes=n, log_level='info') if n > 1 else uvicorn.run('bare_app:app', "
            "host='127.0.0.1', port=port, log_level='info')")
    proc = subprocess.Popen([sys.executable, "-c", code, str(folder), str(port), str(processes),
                             str(REPO)],
                            stdout=open(folder / "bare.log", "wb"),  # noqa: SIM115
                            stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    wait_up(url + "/bare", proc)
    return proc, url


async def drive(clients: list[Client], seconds: float,
                one: Callable[[int, Client, int], Awaitable[Reply]], ok: set[int],
                warmup: float = 0.0) -> Timings:
    """Every client sends requests back to back for `warmup` + `seconds`; only the replies to
    requests sent after the warm-up are timed (errors are counted throughout)."""
    timings = Timings()
    start = time.monotonic() + warmup
    stop = start + seconds

    async def loop(i: int, client: Client) -> None:
        n = 0
        while (sent := time.monotonic()) < stop:
            try:
                reply = await one(i, client, n)
            except Exception as exc:
                timings.errors.append(f"{type(exc).__name__}: {exc}")
                continue
            n += 1
            if reply.status not in ok:
                timings.errors.append(str(reply.status))
            elif sent >= start:
                timings.seconds.append(reply.seconds)

    await asyncio.gather(*(loop(i, c) for i, c in enumerate(clients)))
    return timings


async def prepare_verify(url: str) -> None:
    """Run the one Verify the cached workload reuses, and wait until it is done."""
    client = Client(url)
    reply = await client.post_json("/api/v1/questions/fixture-single/verify", {"params": {}})
    run_url = reply.json()["url"]
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if (await client.get(run_url)).json()["status"] in ("done", "failed"):
            break
        await asyncio.sleep(0.2)
    await client.close()


async def main_async(args: argparse.Namespace, server: str, bare: str) -> list[tuple[str, Timings]]:
    n = args.clients
    results: list[tuple[str, Timings]] = []
    await prepare_verify(server)

    async def run(name: str, url: str, setup: Callable[[Client], Awaitable[None]] | None,
                  one: Callable[[int, Client, int], Awaitable[Reply]], ok: set[int]) -> None:
        clients = [Client(url) for _ in range(n)]
        if setup is not None:
            await asyncio.gather(*(setup(c) for c in clients))
        results.append((name, await drive(clients, args.seconds, one, ok, args.warmup)))
        await asyncio.gather(*(c.close() for c in clients))

    slugs = sorted(ANSWERS)
    await run("bare FastAPI endpoint", bare, None,
              lambda i, c, k: c.post_json("/bare", {"answer": "b"}), {200})
    # The app's floor: its middleware, one pool thread and one database read, no more.
    await run("/healthz (the app's floor)", server, None, lambda i, c, k: c.get("/healthz"), {200})
    await run("API answer submit", server, None,
              lambda i, c, k: c.post_json(f"/api/v1/questions/{slugs[k % 3]}/attempts",
                                          {"answer": ANSWERS[slugs[k % 3]]}), {200})
    tokens: dict[int, str] = {}

    async def html_setup(c: Client) -> None:
        tokens[id(c)] = csrf_of((await c.get("/questions/fixture-single")).text)

    await run("HTML answer submit", server, html_setup,
              lambda i, c, k: c.post_form(f"/questions/{slugs[k % 3]}/answer",
                                          [("csrf_token", tokens[id(c)]),
                                           ("answer", ANSWERS[slugs[k % 3]])]), {200})
    await run("cached Verify", server, None,
              lambda i, c, k: c.post_json("/api/v1/questions/fixture-single/verify", {"params": {}}),
              {200})
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0,
                        help="seconds each workload runs untimed first: its 64 new clients' first "
                             "requests (a learner row, three new review cards each) arrive at "
                             "once, which is the start of a class, not its steady state")
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--processes", type=int, default=1,
                        help="web processes of `serve` (PostgreSQL only), and uvicorn workers "
                             "of the bare endpoint")
    parser.add_argument("--rounds", type=int, default=1,
                        help="run every workload this many times, in turn, and pool the requests "
                             "(a two-core machine's figures vary ±15%% from one 5 s run to the next)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        server_proc, server = start_server(folder, args.database_url, args.processes)
        bare_proc, bare = start_bare(folder, args.processes)
        try:
            rounds = [asyncio.run(main_async(args, server, bare)) for _ in range(args.rounds)]
        finally:
            for proc in (server_proc, bare_proc):
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=60)
    results = [(name, Timings.pooled([r[i][1] for r in rounds]))
               for i, (name, _) in enumerate(rounds[0])]
    seconds = args.seconds * args.rounds
    base = len(results[0][1].seconds) / seconds
    db = "PostgreSQL" if args.database_url else "SQLite"
    print(f"{args.clients} clients, {args.seconds:g} s per workload after {args.warmup:g} s "
          f"untimed, {args.rounds} round(s), {db}, {args.processes} web process(es)")
    print(f"{'workload':28} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7} {'vs bare':>8}")
    for name, t in results:
        rate = len(t.seconds) / seconds
        print(f"{name:28} {rate:8.0f} {t.percentile(50) * 1000:8.1f} {t.percentile(99) * 1000:8.1f} "
              f"{len(t.errors):7d} {rate / base:8.0%}")
        if t.errors:
            print(f"    errors: {sorted(set(t.errors))[:5]}")
    if args.rounds > 1:
        # Pooled percentiles mix rounds run at different machine speeds (a slow round's
        # median becomes the pool's tail); each round's own p99 shows the spread within one.
        print("p99 ms of each round:")
        for i, (name, _) in enumerate(results):
            rounds_p99 = "  ".join(f"{r[i][1].percentile(99) * 1000:.0f}" for r in rounds)
            print(f"  {name:26} {rounds_p99}")


if __name__ == "__main__":
    main()
