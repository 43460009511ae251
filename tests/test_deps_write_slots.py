"""Requests that may write run DDPDRILL_WRITE_THREADS at a time; the rest wait in turn, a bounded time."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.main import create_app
from app.quizzes import api as practice_api
from app.quizzes.models import Attempt
from app.settings import Settings

ANSWER = "/api/v1/questions/fixture-single/attempts"


def _attempts(session_factory: sessionmaker[Session]) -> int:
    with session_factory() as s:
        return int(s.scalar(select(func.count()).select_from(Attempt)) or 0)


def test_a_write_past_the_write_threads_waits_then_gets_503_while_reads_go_on(
    settings: Settings, session_factory: sessionmaker[Session], loaded: None,
) -> None:
    settings = settings.model_copy(update={"write_threads": 1, "admission_wait_s": 0.3})
    with TestClient(create_app(settings)) as client:
        slots = client.app.state.write_slots  # type: ignore[attr-defined]
        assert slots.max_value == 1
        # Another request holds the one write slot.
        client.portal.call(slots.acquire)  # type: ignore[union-attr]
        try:
            refused = client.post(ANSWER, json={"answer": "b"})
            assert refused.status_code == 503, refused.text
            assert refused.headers["retry-after"] == "1"
            # Pages, the API's reads and the health check do not queue behind writes.
            for path in ("/questions/fixture-single", "/api/v1/questions", "/healthz"):
                assert client.get(path).status_code == 200, path
        finally:
            client.portal.call(slots.release)  # type: ignore[union-attr]
        assert _attempts(session_factory) == 0  # the refused answer did nothing
        assert client.post(ANSWER, json={"answer": "b"}).status_code == 200
    assert _attempts(session_factory) == 1


def test_the_wait_bounds_the_queue_not_the_view(
    settings: Settings, session_factory: sessionmaker[Session], loaded: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A view that runs longer than the admission wait (a slow disk, a long upload's
    # import) finishes and is answered: only the wait for a write slot is bounded. The view
    # here holds the one write slot until a second answer has waited out the whole
    # admission wait and been refused, so it provably ran longer than that wait.
    entered, go_on = threading.Event(), threading.Event()
    slow_answer = practice_api.answer_question

    def answer_slowly(**kwargs: Any) -> Any:
        entered.set()
        assert go_on.wait(60)
        return slow_answer(**kwargs)

    monkeypatch.setattr(practice_api, "answer_question", answer_slowly)
    settings = settings.model_copy(update={"write_threads": 1, "admission_wait_s": 0.2})
    with TestClient(create_app(settings)) as client, ThreadPoolExecutor(1) as pool:
        first = pool.submit(client.post, ANSWER, json={"answer": "b"})
        try:
            assert entered.wait(60)
            refused = client.post(ANSWER, json={"answer": "b"})
            assert refused.status_code == 503, refused.text
            assert not first.done()
        finally:
            go_on.set()
        reply = first.result(timeout=60)
        assert reply.status_code == 200, reply.text
        assert reply.json()["correct"] is True
    assert _attempts(session_factory) == 1


def test_write_threads_never_exceed_the_view_threads(
    settings: Settings, session_factory: sessionmaker[Session],
) -> None:
    settings = settings.model_copy(update={"write_threads": 64, "threads": 8})
    with TestClient(create_app(settings)) as client:
        assert client.app.state.write_slots.max_value == 8  # type: ignore[attr-defined]
