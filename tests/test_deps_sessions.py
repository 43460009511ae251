"""A request's database session ends with the request, whichever way it ends.

The session is FastAPI's yield dependency (app.deps.get_session, scope="function"): it
commits or rolls back after the view, before the response; when a later dependency refuses
the request after an earlier one read the database (the signed-in user, then CSRF), its
exit runs all the same. No connection stays checked out and, on SQLite, the writer is free.
"""

from __future__ import annotations

import sqlite3

from fastapi.testclient import TestClient
from sqlalchemy import Engine

from tests.factories import parse


def _engine(client: TestClient) -> Engine:
    engine: Engine = client.app.state.engine  # type: ignore[attr-defined]
    return engine


def _assert_database_free(engine: Engine) -> None:
    assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]
    if engine.dialect.name == "sqlite":
        # SQLite's writer is free: another connection's write transaction starts at once.
        other = sqlite3.connect(str(engine.url.database), timeout=0, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            other.execute("ROLLBACK")
        finally:
            other.close()


def test_a_form_post_refused_after_the_user_was_read_leaves_no_transaction(
    author_client: TestClient,
) -> None:
    engine = _engine(author_client)
    _assert_database_free(engine)
    # require_author reads the signed-in user (in the request's write session, which on
    # SQLite takes the writer); then CSRF refuses the post: the view never runs.
    response = author_client.post("/author/questions", data={"slug": "x"})
    assert response.status_code == 403
    _assert_database_free(engine)


def test_a_view_that_raises_leaves_no_transaction(author_client: TestClient) -> None:
    engine = _engine(author_client)
    page = author_client.get("/author/questions/new")
    token = parse(page).select_one("input[name=csrf_token]")
    assert token is not None
    # Past CSRF, the view runs and refuses the form (422): its session is rolled back and closed.
    response = author_client.post("/author/questions", data={"csrf_token": token["value"],
                                                             "slug": "Not A Slug!"})
    assert response.status_code in (400, 422)
    _assert_database_free(engine)


def test_an_answer_leaves_no_connection_checked_out(client: TestClient) -> None:
    engine = _engine(client)
    reply = client.post("/api/v1/questions/fixture-single/attempts", json={"answer": "b"})
    assert reply.status_code == 200
    _assert_database_free(engine)
    assert client.get("/api/v1/review/queue").status_code == 200
    _assert_database_free(engine)
