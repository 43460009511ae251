"""A class at once: the real server against two references, 64 clients each.

    .venv/bin/python benchmarks/load.py [--clients 64] [--seconds 5] [--warmup 1] [--rounds N]
                                        [--database-url URL] [--processes N [--balanced]]
                                        [--class 200] [--class-seconds 60] [--class-warmup 10]

Starts `ddpdrill serve` (the fixture bank, one in-process worker) and, in the same run,
two reference apps under the same uvicorn settings: a bare FastAPI endpoint that parses
a small JSON body and returns JSON, and the floor of the app's own stack, a minimal
FastAPI + SQLAlchemy route (a plain `def`, a session per request) that reads one row
and inserts one, on an SQLite file of its own with the app's pragmas (or, with
--database-url, a schema of its own in that database). Then, for each workload in
turn, 64 clients (each its own connection and cookies, as browsers have) send requests
back to back, --warmup seconds untimed and then --seconds timed: the two references,
API answer submits, HTML answer submits (the form post a browser makes, answered with
the graded page) and cached Verify requests. Prints throughput, p50 and p99 for each and
its throughput as a share of the bare endpoint's and of the floor's.

--class N first runs a class as it arrives, open loop, against the same server: N
learners, each its own client and cookies, arriving over the first 5 s, each in a loop
of loading a question page (the HTML), answering it through the API and thinking 2.5 to
7.5 s (uniformly); --class-warmup seconds untimed, then --class-seconds timed. Prints
the pages' and the answers' p50 and p99 and the errors.

Without --database-url the server uses a fresh SQLite file; with one (PostgreSQL) it
uses that database, which must be migrated (`ddpdrill db upgrade`) and is loaded with
the fixture bank if empty. --processes N runs `serve --processes N` (PostgreSQL only)
and both references as N uvicorn workers too (uvicorn's own supervisor, as `serve`
uses). With --balanced, the N web processes are N separate `serve` processes on ports
of their own, the clients spread over them in turn, as a reverse proxy balancing over N
ports spreads browsers (docs/deploy.md): the kernel's accept on one shared socket hands
most connections of a burst to one process. Figures go in docs/performance.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
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
# The floor of the app's own stack: FastAPI, a plain `def` route in the thread pool, a
# SQLAlchemy session per request that reads one row and inserts one. The engine is made
# as app/db.py makes it: on SQLite the same pragmas, SQLAlchemy beginning the
# transactions, IMMEDIATE for one that writes; on PostgreSQL no pre-ping.
FLOOR_APP = '''
import os

from fastapi import FastAPI
from pydantic import BaseModel
from sqlalchemy import (Boolean, Column, ForeignKey, Integer, MetaData, String, Table,
                        create_engine, event, insert, select)
from sqlalchemy.orm import sessionmaker

URL = os.environ["LOAD_FLOOR_DATABASE_URL"]
metadata = MetaData(schema=os.environ.get("LOAD_FLOOR_SCHEMA") or None)
question = Table("question", metadata, Column("id", Integer, primary_key=True),
                 Column("slug", String(100), unique=True, nullable=False),
                 Column("answer", String(100), nullable=False))
attempt = Table("attempt", metadata, Column("id", Integer, primary_key=True),
                Column("question_id", ForeignKey(question.c.id), nullable=False),
                Column("answer", String(100), nullable=False),
                Column("correct", Boolean, nullable=False))

if URL.startswith("sqlite"):
    engine = create_engine(URL, connect_args={"check_same_thread": False, "timeout": 10},
                           pool_size=40, max_overflow=8, pool_timeout=5)

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection, _record):
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        for pragma in ("journal_mode=WAL", "foreign_keys=ON", "busy_timeout=10000",
                       "synchronous=NORMAL"):
            cursor.execute(f"PRAGMA {pragma}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(conn):
        conn.exec_driver_sql("BEGIN IMMEDIATE")
else:
    # Few connections: the app's own processes may hold 40 each, in the same run, of the
    # 100 PostgreSQL allows by default; at most 8 queries at once on two cores is no limit.
    engine = create_engine(URL, pool_size=8, max_overflow=0, pool_timeout=30)
Session = sessionmaker(bind=engine)

app = FastAPI()


class Body(BaseModel):
    slug: str
    answer: str


@app.post("/floor")
def floor(body: Body) -> dict[str, object]:
    with Session() as session, session.begin():
        row = session.execute(select(question.c.id, question.c.answer)
                              .where(question.c.slug == body.slug)).one()
        correct = body.answer == row.answer
        session.execute(insert(attempt).values(question_id=row.id, answer=body.answer,
                                               correct=correct))
    return {"answer": body.answer, "correct": correct}
'''
FLOOR_SCHEMA = "load_floor"


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


def start_server(folder: Path, database_url: str | None, processes: int,
                 log: str = "server.log") -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, "DDPDRILL_DATA_DIR": str(folder / "data"),
           "DDPDRILL_BANK_DIR": str(FIXTURE_BANK), "DDPDRILL_WORKERS": "1",
           "DDPDRILL_SECRET_KEY": "load-benchmark-secret-key-0123456789abcdef0123456789"}
    if database_url:
        env["DDPDRILL_DATABASE_URL"] = database_url
        subprocess.run([sys.executable, "-m", "app.cli", "bank", "import", str(FIXTURE_BANK)],
                       cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL)
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--port", str(port),
                             "--processes", str(processes)],
                            cwd=REPO, env=env, stdout=open(folder / log, "wb"),  # noqa: SIM115
                            stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    wait_up(url + "/healthz", proc)
    return proc, url


def start_reference(folder: Path, module: str, path: str, processes: int,
                    env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    """One reference app (`module`.py in `folder`) under the uvicorn settings `ddpdrill serve`
    uses: uvicorn.run(app, host, port, log_level="info"), or with N > 1 processes uvicorn's
    own supervisor (workers=N, which needs the app as an import string)."""
    port = free_port()
    code = ("import sys, uvicorn; n = int(sys.argv[3]); "
            "uvicorn.run(sys.argv[2], host='127.0.0.1', port=int(sys.argv[4]), "
            "log_level='info', app_dir=sys.argv[1], workers=n if n > 1 else None)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(folder), f"{module}:app",
                             str(processes), str(port)],
                            env={**os.environ, **env},
                            stdout=open(folder / f"{module}.log", "wb"),  # noqa: SIM115
                            stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    wait_up(url + path, proc)
    return proc, url


def start_bare(folder: Path, processes: int) -> tuple[subprocess.Popen[bytes], str]:
    (folder / "bare_app.py").write_text(BARE_APP)
    return start_reference(folder, "bare_app", "/bare", processes, {})


def start_floor(folder: Path, database_url: str | None,
                processes: int) -> tuple[subprocess.Popen[bytes], str]:
    """The floor app, on a fresh SQLite file in `folder` or a fresh schema of its own in the
    PostgreSQL database; its tables are made here, before its processes start."""
    from sqlalchemy import create_engine, insert, text

    (folder / "floor_app.py").write_text(FLOOR_APP)
    url = database_url or f"sqlite:///{folder / 'floor.sqlite3'}"
    env = {"LOAD_FLOOR_DATABASE_URL": url, "LOAD_FLOOR_SCHEMA": FLOOR_SCHEMA if database_url else ""}
    os.environ.update(env)
    sys.path.insert(0, str(folder))
    import floor_app  # type: ignore[import-not-found]

    engine = create_engine(url)
    with engine.begin() as conn:
        if database_url:
            conn.execute(text(f"DROP SCHEMA IF EXISTS {FLOOR_SCHEMA} CASCADE"))
            conn.execute(text(f"CREATE SCHEMA {FLOOR_SCHEMA}"))
        floor_app.metadata.create_all(conn)
        conn.execute(insert(floor_app.question),
                     [{"slug": slug, "answer": answer} for slug, answer in ANSWERS.items()])
    engine.dispose()
    floor_app.engine.dispose()
    return start_reference(folder, "floor_app", "/floor", processes, env)


def drop_floor(database_url: str | None) -> None:
    if database_url:
        from sqlalchemy import create_engine, text

        engine = create_engine(database_url)
        with engine.begin() as conn:
            conn.execute(text(f"DROP SCHEMA IF EXISTS {FLOOR_SCHEMA} CASCADE"))
        engine.dispose()


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


def home(i: int) -> str:
    """Visitor i's own address (127.0.1.1, 127.0.1.2, ...): learners at home, each under the
    per-address limits of their own, as a class of 200 is (app/ratelimit.py)."""
    return f"127.0.{1 + i // 250}.{1 + i % 250}"


async def answered(client: Client) -> None:
    """Answer the question Verify runs, as a learner must before its runs are theirs."""
    reply = await client.post_json("/api/v1/questions/fixture-single/attempts",
                                   {"answer": ANSWERS["fixture-single"]})
    if reply.status != 200:
        raise SystemExit(f"answering fixture-single gave {reply.status}: {reply.text[:500]}")


async def prepare_verify(url: str) -> None:
    """Run the one Verify the cached workload reuses, and wait until it is done."""
    client = Client(url)
    await answered(client)  # a run is an answerer's to see (app/reveal.py)
    reply = await client.post_json("/api/v1/questions/fixture-single/verify", {"params": {}})
    run_url = reply.json()["url"]
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if (await client.get(run_url)).json()["status"] in ("done", "failed"):
            break
        await asyncio.sleep(0.2)
    await client.close()


async def main_async(args: argparse.Namespace, servers: list[str], bare: str,
                     floor: str) -> list[tuple[str, Timings]]:
    n = args.clients
    results: list[tuple[str, Timings]] = []
    server: str | list[str] = servers if len(servers) > 1 else servers[0]
    await prepare_verify(servers[0])

    async def run(name: str, url: str | list[str], setup: Callable[[Client], Awaitable[None]] | None,
                  one: Callable[[int, Client, int], Awaitable[Reply]], ok: set[int]) -> None:
        urls = [url] if isinstance(url, str) else url
        clients = [Client(urls[i % len(urls)], source=home(i)) for i in range(n)]
        if setup is not None:
            await asyncio.gather(*(setup(c) for c in clients))
        results.append((name, await drive(clients, args.seconds, one, ok, args.warmup)))
        await asyncio.gather(*(c.close() for c in clients))

    slugs = sorted(ANSWERS)
    await run(BARE, bare, None, lambda i, c, k: c.post_json("/bare", {"answer": "b"}), {200})
    await run(FLOOR, floor, None,
              lambda i, c, k: c.post_json("/floor", {"slug": slugs[k % 3],
                                                     "answer": ANSWERS[slugs[k % 3]]}), {200})
    # The app's own floor: its middleware, one pool thread and one database read, no more.
    await run("/healthz", server, None, lambda i, c, k: c.get("/healthz"), {200})
    await run("API answer submit", server, None,
              lambda i, c, k: c.post_json(f"/api/v1/questions/{slugs[k % 3]}/attempts",
                                          {"answer": ANSWERS[slugs[k % 3]]}), {200})
    tokens: dict[int, str] = {}

    async def html_setup(c: Client) -> None:
        page = await c.get("/questions/fixture-single")
        if page.status != 200:
            raise SystemExit(f"the question page answered {page.status}: {page.text[:2000]}")
        tokens[id(c)] = csrf_of(page.text)

    await run("HTML answer submit", server, html_setup,
              lambda i, c, k: c.post_form(f"/questions/{slugs[k % 3]}/answer",
                                          [("csrf_token", tokens[id(c)]),
                                           ("answer", ANSWERS[slugs[k % 3]])]), {200})
    await run("cached Verify", server, answered,
              lambda i, c, k: c.post_json("/api/v1/questions/fixture-single/verify", {"params": {}}),
              {200})
    return results


async def a_class(url: str, learners: int, seconds: float, warmup: float,
                  arrival_s: float = 5.0, think_s: tuple[float, float] = (2.5, 7.5),
                  seed: int = 1) -> tuple[Timings, Timings, int]:
    """`learners` learners arrive over `arrival_s` and each loops: load a question page, answer
    it through the API, think. Open loop: a slow reply delays only its own learner. Returns the
    pages' and the answers' timings (those sent after `warmup`) and the answers sent."""
    rng = random.Random(seed)
    pages, answers = Timings(), Timings()
    slugs = sorted(ANSWERS)
    start = time.monotonic()
    timed, stop = start + warmup, start + warmup + seconds
    sent = 0

    async def timed_request(timings: Timings, request: Awaitable[Reply]) -> None:
        at = time.monotonic()
        try:
            reply = await request
        except Exception as exc:
            timings.errors.append(f"{type(exc).__name__}: {exc}")
            return
        if reply.status != 200:
            timings.errors.append(str(reply.status))
        elif at >= timed:
            timings.seconds.append(reply.seconds)

    async def learner(i: int) -> None:
        nonlocal sent
        client = Client(url, source=home(i))
        await asyncio.sleep(rng.uniform(0, arrival_s))
        k = rng.randrange(3)
        while time.monotonic() < stop:
            slug = slugs[k % 3]
            await timed_request(pages, client.get(f"/questions/{slug}"))
            await timed_request(answers, client.post_json(f"/api/v1/questions/{slug}/attempts",
                                                          {"answer": ANSWERS[slug]}))
            sent += 1
            k += 1
            await asyncio.sleep(rng.uniform(*think_s))
        await client.close()

    await asyncio.gather(*(learner(i) for i in range(learners)))
    return pages, answers, sent


BARE = "bare FastAPI endpoint"
FLOOR = "FastAPI + SQLAlchemy floor"


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
                             "of the two references")
    parser.add_argument("--balanced", action="store_true",
                        help="with --processes N: N separate `serve` processes on ports of their "
                             "own, the clients spread over them in turn (a proxy's balancing)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="run every workload this many times, in turn, and pool the requests "
                             "(a two-core machine's figures vary ±15%% from one 5 s run to the next)")
    parser.add_argument("--class", dest="learners", type=int, default=0,
                        help="first run a class of this many learners (open loop)")
    parser.add_argument("--class-seconds", type=float, default=60.0)
    parser.add_argument("--class-warmup", type=float, default=10.0)
    parser.add_argument("--only-class", action="store_true",
                        help="run the class and none of the closed-loop workloads")
    args = parser.parse_args()
    klass: tuple[Timings, Timings, int] | None = None
    rounds: list[list[tuple[str, Timings]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        procs: list[subprocess.Popen[bytes]] = []
        try:
            servers: list[str] = []
            if args.balanced:
                if args.processes < 2 or not args.database_url:
                    raise SystemExit("--balanced needs --processes N > 1 and --database-url")
                for i in range(args.processes):
                    server_proc, url = start_server(folder, args.database_url, 1, f"server-{i}.log")
                    procs.append(server_proc)
                    servers.append(url)
            else:
                server_proc, url = start_server(folder, args.database_url, args.processes)
                procs.append(server_proc)
                servers.append(url)
            server = servers[0]
            bare_proc, bare = start_bare(folder, args.processes)
            procs.append(bare_proc)
            floor_proc, floor = start_floor(folder, args.database_url, args.processes)
            procs.append(floor_proc)
            if args.learners:
                klass = asyncio.run(a_class(server, args.learners, args.class_seconds,
                                            args.class_warmup))
            if not args.only_class:
                rounds = [asyncio.run(main_async(args, servers, bare, floor))
                          for _ in range(args.rounds)]
        except BaseException:
            log = folder / "server.log"
            if log.exists():  # the server's own account of what went wrong
                print("".join(log.read_text(errors="replace").splitlines(True)[-80:]), file=sys.stderr)
            raise
        finally:
            for proc in procs:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=60)
            drop_floor(args.database_url)
    db = "PostgreSQL" if args.database_url else "SQLite"
    if klass is not None:
        pages, answers, sent = klass
        print(f"A class of {args.learners} learners, {db}, {args.processes} web process(es): "
              f"{args.class_seconds:g} s timed after {args.class_warmup:g} s untimed; "
              f"{sent} answers in all ({sent / (args.class_warmup + args.class_seconds):.0f}/s)")
        print(f"{'':10} {'timed':>7} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'errors':>7}")
        for name, t in (("page", pages), ("answer", answers)):
            print(f"{name:10} {len(t.seconds):7d} {t.percentile(50) * 1000:8.1f} "
                  f"{t.percentile(99) * 1000:8.1f} {t.percentile(100) * 1000:8.1f} "
                  f"{len(t.errors):7d}")
            if t.errors:
                print(f"    errors: {sorted(set(t.errors))[:5]}")
    if not rounds:
        return
    results = [(name, Timings.pooled([r[i][1] for r in rounds]))
               for i, (name, _) in enumerate(rounds[0])]
    seconds = args.seconds * args.rounds
    rates = {name: len(t.seconds) / seconds for name, t in results}
    shape = (f"{args.processes} separate `serve` processes, clients spread over them"
             if args.balanced else f"{args.processes} web process(es)")
    print(f"{args.clients} clients, {args.seconds:g} s per workload after {args.warmup:g} s "
          f"untimed, {args.rounds} round(s), {db}, {shape}")
    print(f"{'workload':28} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7} "
          f"{'vs bare':>8} {'vs floor':>9}")
    for name, t in results:
        rate = rates[name]
        print(f"{name:28} {rate:8.0f} {t.percentile(50) * 1000:8.1f} {t.percentile(99) * 1000:8.1f} "
              f"{len(t.errors):7d} {rate / rates[BARE]:8.0%} {rate / rates[FLOOR]:9.2f}")
        if t.errors:
            print(f"    errors: {sorted(set(t.errors))[:5]}")
    if args.rounds > 1:
        # Pooled percentiles mix rounds run at different machine speeds (a slow round's
        # median becomes the pool's tail); each round's own p99 shows the spread within one.
        print("req/s and p99 ms of each round:")
        for i, (name, _) in enumerate(results):
            each = "  ".join(f"{len(r[i][1].seconds) / args.seconds:.0f} "
                             f"({r[i][1].percentile(99) * 1000:.0f})" for r in rounds)
            print(f"  {name:26} {each}")


if __name__ == "__main__":
    main()
