"""The one rate limiter (app/ratelimit.py) on a real database: a sliding window per (bucket, key),
a refusal that counts nothing and says when to come back, a hit taken back, and dead hits
swept as later hits arrive; a refusal sent late."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app import middleware, ratelimit
from app.db import session_scope
from app.errors import RateLimited
from app.middleware import AdmissionMiddleware
from app.ratelimit import RateHit

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def _hit(s: Session, key: str, at: datetime, *, limit: int = 3, window_s: float = 60,
         bucket: str = "answer") -> int:
    return ratelimit.hit(db_session=s, bucket=bucket, key=key, limit=limit, window_s=window_s,
                         message="slow down", now=at)


def _rows(s: Session, bucket: str = "answer") -> int:
    return int(s.scalar(select(func.count()).select_from(RateHit)
                        .where(RateHit.bucket == bucket)) or 0)


def test_past_the_limit_a_hit_is_refused_counts_nothing_and_says_when_a_slot_frees(
    db_session: Session,
) -> None:
    for second in (0, 10, 20):
        _hit(db_session, "lena", T0 + timedelta(seconds=second))
    with pytest.raises(RateLimited) as refused:
        _hit(db_session, "lena", T0 + timedelta(seconds=30))
    # The oldest hit (at 0 s) leaves the 60 s window at 60 s: 30 s from now.
    assert refused.value.retry_after_s == 30
    assert _rows(db_session) == 3
    # Another key has its own window; the same key is let in once the oldest hit leaves.
    _hit(db_session, "omar", T0 + timedelta(seconds=30))
    _hit(db_session, "lena", T0 + timedelta(seconds=61))


def test_a_cost_counts_as_that_many_hits_or_none(db_session: Session) -> None:
    ratelimit.hit(db_session=db_session, bucket="exercise", key="lena", limit=5, window_s=60,
                  message="", cost=4, now=T0)
    with pytest.raises(RateLimited):
        ratelimit.hit(db_session=db_session, bucket="exercise", key="lena", limit=5,
                      window_s=60, message="", cost=2, now=T0)
    assert _rows(db_session, "exercise") == 4


def test_a_hit_taken_back_frees_its_slot(db_session: Session) -> None:
    ids = [_hit(db_session, "lena", T0) for _ in range(3)]
    ratelimit.forgive(db_session=db_session, hit_id=ids[-1])
    _hit(db_session, "lena", T0)
    assert _rows(db_session) == 3


def test_hits_older_than_the_window_are_swept_as_later_hits_arrive(
    db_session: Session, monkeypatch: pytest.MonkeyPatch,
) -> None:
    old = T0 - timedelta(hours=1)
    for i in range(10):
        _hit(db_session, f"gone-{i}", old)
    _hit(db_session, "elsewhere", old, bucket="login")
    assert _rows(db_session) == 10
    # One hit in SWEEP_EVERY, at random, sweeps its bucket; here every one does.
    monkeypatch.setattr(ratelimit, "SWEEP_EVERY", 1)
    _hit(db_session, "now", T0)
    assert _rows(db_session) == 1  # the old hits went, today's stays
    assert _rows(db_session, "login") == 1  # another bucket's window is its own


def test_a_refusal_is_sent_late_so_a_flood_waits_instead_of_spending_the_cores(
    client: TestClient, session_factory: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch,
) -> None:
    waited: list[tuple[float, int]] = []
    assert client.get("/healthz").status_code == 200  # (the middleware stack is built)
    admission = next(m for m in _middlewares(client.app) if isinstance(m, AdmissionMiddleware))

    async def wait(seconds: float) -> None:  # recorded instead of slept: no timing in tests
        waited.append((seconds, admission.in_flight))

    monkeypatch.setattr(middleware, "_wait", wait)
    with session_scope(session_factory) as s:  # the address has used its answers
        for _ in range(ratelimit.ANSWERS.per_address):
            ratelimit.hit(db_session=s, bucket="answer-ip", key="testclient", limit=10**6,
                          window_s=60, message="")
    r = client.post("/api/v1/questions/fixture-single/attempts", json={"answer": "b"})
    assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1
    assert "Too many answers" in r.text
    # Held back once, and outside admission: while it waits it holds no slot.
    assert waited == [(middleware.REFUSAL_DELAY_S, 0)]
    assert client.get("/healthz").status_code == 200 and len(waited) == 1  # 200s go at once


def _middlewares(app: Any) -> list[Any]:
    """The app's middleware instances, outermost first."""
    found, layer = [], app.middleware_stack
    while layer is not None:
        found.append(layer)
        layer = getattr(layer, "app", None)
    return found
