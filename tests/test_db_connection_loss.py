"""The database drops the server's connections (a PostgreSQL restart, a failover).

The pool does not test a connection before each use (that was a round trip per
request), so a request on a dropped connection fails; it must fail as a 503 the
client may retry, and the retry must succeed on a new connection.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
from sqlalchemy import create_engine, text

from tests.factories import FIXTURE, run_async
from tests.loadclient import Client
from tests.servers import Server

SLUG = sorted(FIXTURE)[0]


def _drop_connections(database_url: str, application_name: str) -> int:
    """Terminate every backend the server opened; how many there were."""
    engine = create_engine(database_url)
    try:
        with engine.begin() as conn:
            return len(conn.execute(text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = :name AND pid <> pg_backend_pid()"),
                {"name": application_name}).all())
    finally:
        engine.dispose()


def test_dropped_connections_cost_at_most_a_retry(
    server: Callable[..., Server], database_url: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("PostgreSQL drops connections on a restart; SQLite has none to drop")
    name = f"ddpdrill-drop-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("PGAPPNAME", name)  # libpq's name for the server's connections
    srv = server()

    async def answer(client: Client, n: int) -> tuple[int, str | None]:
        reply = await client.post_json(f"/api/v1/questions/{SLUG}/attempts",
                                       {"answer": FIXTURE[SLUG]["right"]},
                                       headers={"Idempotency-Key": f"drop-{n}"})
        return reply.status, reply.headers.get("retry-after")

    async def main() -> list[list[tuple[int, str | None]]]:
        client = Client(srv.url)
        try:
            before = [await answer(client, n) for n in range(5)]
            assert _drop_connections(srv.database_url, name) >= 1
            after = [await answer(client, 100 + n) for n in range(5)]
            return [before, after]
        finally:
            await client.close()

    before, after = run_async(main)
    assert [status for status, _ in before] == [200] * 5
    # At most the first request after the drop fails, and it says to retry.
    failed = [(status, retry) for status, retry in after if status != 200]
    assert len(failed) <= 1, after
    assert all(status == 503 and retry for status, retry in failed), after
    assert after[-1][0] == 200
