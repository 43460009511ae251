"""The app as a whole: health, error pages, the learner cookie, static files, SQLite settings."""

from __future__ import annotations

from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from itsdangerous import URLSafeSerializer
from sqlalchemy import text as sql
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from app.accounts.models import Learner
from app.db import SQLITE_BUSY_TIMEOUT_MS, make_engine
from app.identity import LEARNER_COOKIE, LEARNER_COOKIE_MAX_AGE
from app.main import create_app
from app.migrate import upgrade
from app.quizzes.models import Quiz
from app.settings import Settings
from tests.factories import FIXTURE_BANK, api_routes, count, learner_id, parse, start_quiz, text


def _set_cookie(response: object) -> SimpleCookie:
    jar: SimpleCookie = SimpleCookie()
    for header in response.headers.get_list("set-cookie"):  # type: ignore[attr-defined]
        jar.load(header)
    return jar


def test_healthz_answers_200_once_ready(app_client: TestClient) -> None:
    response = app_client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "sandbox": "on"}


def test_unknown_pages_are_html_404_pages(client: TestClient) -> None:
    for path, words in [("/no/such/page", "Not Found"),
                        ("/questions/no-such-question", "No question called"),
                        ("/topics/no-such-topic", "No topic called")]:
        response = client.get(path)
        assert response.status_code == 404, path
        assert response.headers["content-type"].startswith("text/html")
        page = parse(response)
        assert text(page.h1) == "Not found"
        assert words in text(page.select_one("p.error[role=alert]"))
        assert page.select_one("main a[href='/']") is not None


def test_a_malformed_path_parameter_is_a_422_page_not_a_crash(client: TestClient) -> None:
    url = start_quiz(client, count="1")
    response = client.get(url.rsplit("/", 1)[0] + "/first")
    assert response.status_code == 422
    assert "position" in text(parse(response).select_one("p.error"))


def test_first_visit_gets_a_signed_httponly_learner_cookie(client: TestClient, settings: Settings) -> None:
    response = client.get("/")
    morsel = _set_cookie(response)[LEARNER_COOKIE]
    assert morsel["httponly"] is True
    assert morsel["samesite"] == "Lax"
    assert morsel["path"] == "/"
    assert int(morsel["max-age"]) == LEARNER_COOKIE_MAX_AGE
    assert not morsel["secure"]
    learner = URLSafeSerializer(settings.resolved_secret_key(), salt="learner").loads(morsel.value)
    assert learner != morsel.value  # signed, not the bare id
    # Known from now on: no new cookie on the next request.
    assert LEARNER_COOKIE not in _set_cookie(client.get("/"))


def test_the_learner_cookie_is_secure_over_https(
    settings: Settings, session_factory: sessionmaker[Session]
) -> None:
    with TestClient(create_app(settings), base_url="https://testserver") as client:
        assert _set_cookie(client.get("/healthz"))[LEARNER_COOKIE]["secure"] is True


def test_a_tampered_learner_cookie_gets_a_fresh_identity(
    client: TestClient, settings: Settings, session_factory: sessionmaker[Session]
) -> None:
    quiz = start_quiz(client, count="1")
    mine = learner_id(client, settings)
    value = client.cookies[LEARNER_COOKIE]
    signer = URLSafeSerializer(settings.resolved_secret_key(), salt="learner")
    forgeries = {
        # Not the last character: its low bits are base64 padding and may not count.
        "flipped signature": value[:-10] + ("A" if value[-10] != "A" else "B") + value[-9:],
        "another key": URLSafeSerializer("another-key", salt="learner").dumps(mine),
        "not a uuid": signer.dumps("admin"),
        "garbage": "%%%;;",
    }
    for forge, forged in forgeries.items():
        intruder = TestClient(client.app, cookies={LEARNER_COOKIE: forged})

        response = intruder.get(quiz)

        assert response.status_code == 404, forge
        assert signer.loads(_set_cookie(response)[LEARNER_COOKIE].value) != mine, forge
    assert count(session_factory, Quiz) == 1
    assert count(session_factory, Learner) == 1


def test_another_sites_malformed_cookie_does_not_cost_the_learner_their_identity(
    client: TestClient
) -> None:
    # Cookies ignore ports: another app on 127.0.0.1 may set values Python's SimpleCookie
    # refuses, and it then dropped the whole header, learner cookie included.
    quiz = start_quiz(client, count="1")
    mine = client.cookies[LEARNER_COOKIE]
    bare = TestClient(client.app)
    for header in (f'{LEARNER_COOKIE}={mine}; other=a b',
                   f'jupyter="2|x y; {LEARNER_COOKIE}={mine}'):
        response = bare.get(quiz, headers={"Cookie": header})
        assert response.status_code == 200, header
        assert LEARNER_COOKIE not in _set_cookie(response), header


def test_static_files_and_vendored_htmx_are_served(client: TestClient) -> None:
    page = parse(client.get("/"))
    scripts = [s["src"] for s in page.select("script[src]")]
    assert any("htmx" in s for s in scripts)
    for src in scripts + [link["href"] for link in page.select("link[rel=stylesheet]")]:
        response = client.get(src)
        assert response.status_code == 200, src
    assert client.get("/static-gen/pygments.css").headers["content-type"].startswith("text/css")


def test_sqlite_connections_use_wal_foreign_keys_and_a_busy_timeout(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    upgrade(url)
    settings = Settings(database_url=url, secret_key="k", data_dir=tmp_path, bank_dir=FIXTURE_BANK, workers=0)
    app = create_app(settings)
    engine = app.state.engine
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == SQLITE_BUSY_TIMEOUT_MS
        with pytest.raises(IntegrityError), engine.begin() as conn:
            conn.execute(sql("INSERT INTO quizzes (id, learner_id, kind, topics, started_at) "
                             "VALUES ('q', 'nobody', 'practice', '[]', '2026-01-01')"))
    finally:
        engine.dispose()


def test_make_engine_applies_the_pragmas_to_every_new_connection(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'x.db'}")
    try:
        for _ in range(2):
            with engine.connect() as conn:
                assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            engine.dispose()  # the next connect opens a new DBAPI connection
    finally:
        engine.dispose()


def test_every_session_a_view_gets_ends_before_its_response(app_client: TestClient) -> None:
    """The request's session is FastAPI's yield dependency with scope="function": it commits
    (or rolls back) after the view and before the response, so a failed commit is an error
    the client sees. No route may reach a session any other way."""
    from app.deps import get_session, get_write_session

    def sessions(dependant: Any) -> list[Any]:
        found = [d for d in dependant.dependencies if d.call in (get_session, get_write_session)]
        return found + [x for d in dependant.dependencies for x in sessions(d)]

    with_session = 0
    for route in api_routes(app_client.app):
        for dep in sessions(route.dependant):
            assert dep.scope == "function", route.path
            with_session += 1
    assert with_session > 50
