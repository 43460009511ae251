"""A class at once: concurrent answers against a real server, on SQLite and PostgreSQL.

Every test drives a `ddpdrill serve` subprocess with many clients, each with its own
cookies, and then checks the database: every answer the server acknowledged is
stored, and stored once.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sqlite3
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

from sqlalchemy import create_engine, func, select, text
from sqlalchemy.orm import Session, sessionmaker

from app.quizzes.models import Attempt, Quiz, QuizItem
from app.verify.models import RUN_DONE, Run
from tests.factories import FIXTURE, copy_bank, import_folder, run_async, wait_for
from tests.loadclient import Client, Reply, answer_fields, csrf_of
from tests.servers import Server

QUIZ_ITEM = re.compile(r"^/quizzes/(?P<id>[0-9a-f-]{36})/(?P<pos>\d+)$")
SLUGS = sorted(FIXTURE)
# A bound on how long a test holds the database, so that a failing test ends.
HOLD_LIMIT_S = 120
# Distinct knob values requested at once (each by two learners) in the burst test.
BURST_DISTINCT = 40


async def api_answer(client: Client, slug: str, key: str) -> Reply:
    return await client.post_json(f"/api/v1/questions/{slug}/attempts",
                                  {"answer": FIXTURE[slug]["right"]},
                                  headers={"Idempotency-Key": key})


async def open_quiz(client: Client, count: int = 3) -> tuple[str, str]:
    """Start a quiz as a browser does; returns (quiz id, the first item's path)."""
    home = await client.get("/")
    assert home.status == 200, home.status
    reply = await client.post_form("/quizzes", [("csrf_token", csrf_of(home.text)), ("count", str(count))])
    assert reply.status == 303, (reply.status, reply.text[:300])
    match = QUIZ_ITEM.match(reply.headers["location"])
    assert match is not None, reply.headers["location"]
    return match["id"], reply.headers["location"]


async def answer_item(client: Client, path: str) -> Reply:
    """Show a quiz item and submit an answer through its form, as a browser does."""
    page = await client.get(path)
    assert page.status == 200, (path, page.status)
    return await client.post_form(path + "/answer", answer_fields(page.text))


async def quiz_flow(client: Client, count: int = 3) -> tuple[str, list[int]]:
    """A whole quiz: start, answer every item, reach the summary; the statuses of the answers."""
    quiz_id, path = await open_quiz(client, count)
    statuses = []
    while True:
        reply = await answer_item(client, path)
        statuses.append(reply.status)
        if reply.status != 303:
            return quiz_id, statuses
        nxt = await client.get(f"/quizzes/{quiz_id}")
        if nxt.headers.get("location", "").endswith("/summary"):
            summary = await client.get(nxt.headers["location"])
            statuses.append(summary.status)
            return quiz_id, statuses
        path = nxt.headers["location"]


async def closing(clients: list[Client]) -> None:
    await asyncio.gather(*(c.close() for c in clients))


def test_64_concurrent_api_answers_all_succeed_and_are_stored_once(
    server: Callable[..., Server], session_factory: sessionmaker[Session],
) -> None:
    srv = server()

    async def main() -> list[tuple[int, Reply]]:
        clients = [Client(srv.url) for _ in range(64)]
        try:
            # Three rounds each, on different questions: 192 answers from 64 learners.
            replies: list[tuple[int, Reply]] = []
            for round_ in range(3):
                results = await asyncio.gather(*(
                    api_answer(c, SLUGS[(i + round_) % len(SLUGS)], f"k{i}-{round_}")
                    for i, c in enumerate(clients)))
                replies += [(i, r) for i, r in enumerate(results)]
            return replies
        finally:
            await closing(clients)

    replies = run_async(main)
    assert [r.status for _, r in replies if r.status != 200] == []
    ids = [r.json()["attempt_id"] for _, r in replies]
    assert len(set(ids)) == 192
    with session_factory() as s:
        stored = s.scalars(select(Attempt.id).where(Attempt.id.in_(ids))).all()
        assert sorted(stored) == sorted(ids)
        assert s.scalar(select(func.count()).select_from(Attempt)) == 192


def test_16_concurrent_html_quiz_flows_complete_without_errors(
    server: Callable[..., Server], session_factory: sessionmaker[Session],
) -> None:
    srv = server()

    async def main() -> list[tuple[str, list[int]]]:
        clients = [Client(srv.url) for _ in range(16)]
        try:
            return list(await asyncio.gather(*(quiz_flow(c, count=3) for c in clients)))
        finally:
            await closing(clients)

    flows = run_async(main)
    for _quiz_id, statuses in flows:
        assert statuses == [303, 303, 303, 200], statuses
    with session_factory() as s:
        for quiz_id, _ in flows:
            items = s.scalars(select(QuizItem.id).where(QuizItem.quiz_id == quiz_id)).all()
            answered = s.scalars(select(Attempt.quiz_item_id)
                                 .where(Attempt.quiz_item_id.in_(items))).all()
            assert sorted(answered) == sorted(items)  # one attempt per item, none twice
        assert s.scalar(select(func.count()).select_from(Quiz)) == 16


@contextlib.contextmanager
def database_held(database_url: str) -> Iterator[threading.Event]:
    """Another connection holds the write lock (SQLite) or locks the attempts table
    (PostgreSQL) until the event it yields is set."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        if database_url.startswith("sqlite"):
            conn = sqlite3.connect(database_url.removeprefix("sqlite:///"), isolation_level=None)
            conn.execute("BEGIN IMMEDIATE")
            held.set()
            release.wait(HOLD_LIMIT_S)
            conn.execute("COMMIT")
            conn.close()
            return
        engine = create_engine(database_url)
        with engine.begin() as conn:
            conn.execute(text("LOCK TABLE attempts IN SHARE ROW EXCLUSIVE MODE"))
            held.set()
            release.wait(HOLD_LIMIT_S)
        engine.dispose()

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    assert held.wait(60)
    try:
        yield release
    finally:
        release.set()
        thread.join(60)


def _writers_waiting_for_attempts(database_url: str) -> int:
    """PostgreSQL: how many sessions wait for a lock on the attempts table."""
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(text(
                "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'attempts'::regclass"
            )).scalar_one())
    finally:
        engine.dispose()


async def until(condition: Callable[[], Awaitable[bool]], what: str) -> None:
    """Waits for a condition by polling it; a bound only so that a bug fails instead of hanging."""
    for _ in range(6000):
        if await condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never: {what}")


def test_healthz_answers_while_answers_wait_for_the_database(
    server: Callable[..., Server], session_factory: sessionmaker[Session], database_url: str,
) -> None:
    """The event-loop test: 8 HTML quiz answers and 8 API answers wait for a database lock
    held elsewhere until /healthz has answered five times; a view that blocked the loop
    would stall /healthz until the lock is released, which never comes."""
    # Answers wait for a write slot for as long as the lock is held, never refused for it.
    srv = server(admission_wait_s="600")

    async def main() -> list[Reply]:
        quizzers = [Client(srv.url) for _ in range(8)]
        api = [Client(srv.url) for _ in range(8)]
        probe = Client(srv.url)
        try:
            opened = await asyncio.gather(*(open_quiz(c) for c in quizzers))
            pages = await asyncio.gather(
                *(c.get(path) for c, (_, path) in zip(quizzers, opened, strict=True)))
            assert (await probe.get("/healthz")).status == 200  # connected, and the pool warm
            # Each answer opens its connection and writes its request in one step, so once
            # every client is connected the server has every answer to read.
            await closing(quizzers)
            with database_held(database_url) as release:
                answers = asyncio.gather(
                    *(c.post_form(path + "/answer", answer_fields(p.text))
                      for c, (_, path), p in zip(quizzers, opened, pages, strict=True)),
                    *(api_answer(c, SLUGS[i % len(SLUGS)], f"loop-{i}") for i, c in enumerate(api)))

                async def all_sent() -> bool:
                    return all(c.connected for c in [*quizzers, *api])

                await until(all_sent, "every answer sent")
                if not database_url.startswith("sqlite"):
                    async def a_writer_waits() -> bool:
                        return await asyncio.to_thread(_writers_waiting_for_attempts, database_url) > 0

                    await until(a_writer_waits, "an answer waiting for the attempts table")
                for _ in range(5):
                    assert (await probe.get("/healthz")).status == 200
                    assert not answers.done()  # every answer still waits for the database
                release.set()
                return list(await answers)
        finally:
            await closing([*quizzers, *api, probe])

    replies = run_async(main)
    assert sorted(r.status for r in replies) == [200] * 8 + [303] * 8
    with session_factory() as s:
        assert s.scalar(select(func.count()).select_from(Attempt)) == 16


def test_server_killed_during_answer_load_keeps_every_acknowledged_attempt_once(
    server: Callable[..., Server], session_factory: sessionmaker[Session],
) -> None:
    srv = server()
    acknowledged: dict[str, int] = {}
    sent: list[tuple[int, str, str]] = []

    async def client_loop(i: int, client: Client, stop: asyncio.Event) -> None:
        n = 0
        while not stop.is_set():
            slug = SLUGS[n % len(SLUGS)]
            key = f"c{i}-{n}-{uuid.uuid4().hex[:6]}"
            sent.append((i, slug, key))
            n += 1
            try:
                reply = await api_answer(client, slug, key)
            except (OSError, asyncio.IncompleteReadError, ConnectionError, TimeoutError, ValueError):
                return  # the server died under us: this answer was never acknowledged
            if reply.status == 200:
                acknowledged[key] = reply.json()["attempt_id"]

    async def load_then_kill(clients: list[Client]) -> None:
        stop = asyncio.Event()
        tasks = [asyncio.create_task(client_loop(i, c, stop)) for i, c in enumerate(clients)]
        while len(acknowledged) < 60:
            await asyncio.sleep(0.02)
        srv.kill()
        stop.set()
        await asyncio.gather(*tasks)

    async def retry_all(clients: list[Client]) -> dict[str, int]:
        # The client's contract: replay an unacknowledged answer with the same key.
        out: dict[str, int] = {}
        for i, slug, key in sent:
            reply = await api_answer(clients[i], slug, key)
            assert reply.status in (200, 409), reply.status
            out[key] = reply.json()["attempt_id"]
        return out

    async def main() -> dict[str, int]:
        clients = [Client(srv.url, timeout_s=30) for _ in range(16)]
        try:
            await load_then_kill(clients)
        finally:
            await closing(clients)
        srv.start()
        try:
            return await retry_all(clients)
        finally:
            await closing(clients)

    replayed = run_async(main)
    assert len(acknowledged) >= 60
    for key, attempt_id in acknowledged.items():
        assert replayed[key] == attempt_id  # the acknowledged attempt survived the kill
    with session_factory() as s:
        counts = dict(s.execute(select(Attempt.id, func.count()).group_by(Attempt.id)).all())
        assert set(acknowledged.values()) <= set(counts)
        assert s.scalar(select(func.count()).select_from(Attempt)) == len(sent)
    assert len(set(replayed.values())) == len(sent)


def test_a_burst_of_fresh_verify_requests_is_queued_or_refused_and_every_accepted_run_completes(
    server: Callable[..., Server], session_factory: sessionmaker[Session], tmp_path: Path,
) -> None:
    bank = copy_bank(tmp_path / "bank")
    path = bank / "basics" / "fixture-single.yaml"
    values = list(range(1, BURST_DISTINCT + 1))
    path.write_text(path.read_text().replace("values: [1, 2]", f"values: {values}")
                    .replace("audit: all", "audit: [{scale: 1}, {scale: 2}]"))
    import_folder(session_factory, bank)
    # 10 fresh runs a minute per learner, so 40 from one address: the burst crosses it.
    srv = server(workers="2", verify_rate_per_minute="10")

    async def main() -> list[Reply]:
        clients = [Client(srv.url) for _ in range(2 * BURST_DISTINCT)]
        try:
            # Each learner answers first: runs are theirs only after an answer (app/reveal.py).
            answers = await asyncio.gather(*(
                api_answer(c, "fixture-single", uuid.uuid4().hex) for c in clients))
            assert {r.status for r in answers} == {200}, [r.status for r in answers]
            return list(await asyncio.gather(*(
                c.post_json("/api/v1/questions/fixture-single/verify",
                            {"params": {"scale": values[i % BURST_DISTINCT]}})
                for i, c in enumerate(clients))))
        finally:
            await closing(clients)

    replies = run_async(main)
    assert {r.status for r in replies} <= {200, 429}, [r.status for r in replies]
    accepted = {r.json()["run_id"] for r in replies if r.status == 200}
    assert accepted
    assert all(r.headers.get("retry-after") for r in replies if r.status == 429)

    def all_done() -> bool:
        with session_factory() as s:
            return set(s.scalars(select(Run.status).where(Run.id.in_(accepted))).all()) == {RUN_DONE}

    wait_for(all_done, timeout=180, interval=0.25)
