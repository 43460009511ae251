"""The queue under an attacker's load: private code (learners' exercises, authors' Run now) never
takes the shared lane, one address runs one private run at a time and waits behind everyone
else's first, a runaway's ranks run at the lowest priority, and the queue has caps.

Claims are made with the real service on the real databases; no engine runs here (the
benchmark benchmarks/queue_fairness.py times the whole path with real ranks).
"""

from __future__ import annotations

import dataclasses

import pytest
from sqlalchemy.orm import Session, sessionmaker

from app.db import session_scope
from app.errors import Busy, RateLimited
from app.verify import service
from app.verify.models import PRIORITY_PRIVATE, PRIORITY_SHARED, RUN_QUEUED
from tests.factories import make_request


def _private(factory: sessionmaker[Session], code: str, *, ip: str, owner: str) -> int:
    req = dataclasses.replace(make_request(code), owner=owner, requested_by=f"learner:{owner}",
                              requested_ip=ip)
    with session_scope(factory) as s:
        run, _ = service.request_run(db_session=s, req=req)
        assert run.priority == PRIORITY_PRIVATE
        return run.id


def _shared(factory: sessionmaker[Session], code: str) -> int:
    with session_scope(factory) as s:
        run, _ = service.request_run(db_session=s, req=make_request(code))
        assert run.priority == PRIORITY_SHARED
        return run.id


def _claim(factory: sessionmaker[Session], worker: str,
           lane: str = service.LANE_ANY) -> tuple[int, int] | None:
    with session_scope(factory) as s:
        run = service.claim_run(db_session=s, worker_id=worker, lease_seconds=60, lane=lane)
        return None if run is None else (run.id, service.nice_for(db_session=s, run=run))


def test_the_shared_lane_never_takes_private_code(session_factory: sessionmaker[Session]) -> None:
    mine = _private(session_factory, "while True: pass", ip="10.0.0.1", owner="a")
    assert _claim(session_factory, "shared-worker", service.LANE_SHARED) is None
    bank = _shared(session_factory, "report('x', 1)")
    assert _claim(session_factory, "shared-worker", service.LANE_SHARED) == (bank, 0)
    claimed = _claim(session_factory, "any-worker")
    assert claimed is not None and claimed[0] == mine


def test_shared_runs_come_first_even_when_queued_later(session_factory: sessionmaker[Session]) -> None:
    _private(session_factory, "report('p', 1)", ip="10.0.0.1", owner="a")
    bank = _shared(session_factory, "report('s', 1)")
    claimed = _claim(session_factory, "w")
    assert claimed is not None and claimed[0] == bank


def test_one_address_runs_one_private_run_at_a_time_and_waits_behind_everyone_elses_first(
    session_factory: sessionmaker[Session],
) -> None:
    # 30 submissions from one address (fresh cookies each), then one from somebody else.
    burst = [_private(session_factory, f"report('spin', {i})", ip="10.0.0.66", owner=f"cookie-{i}")
             for i in range(30)]
    victim = _private(session_factory, "report('mine', 1)", ip="10.0.0.7", owner="victim")
    first = _claim(session_factory, "w1")
    assert first is not None and first[0] == burst[0]
    # The burst's address already has a run executing: the next worker takes the victim's.
    second = _claim(session_factory, "w2")
    assert second is not None and second[0] == victim
    # Nothing else may start for the burst's address while its first run holds a lease.
    assert _claim(session_factory, "w3") is None


def test_a_runaway_runs_at_the_lowest_priority_and_a_single_run_above_it(
    session_factory: sessionmaker[Session],
) -> None:
    for i in range(3):
        _private(session_factory, f"report('spin', {i})", ip="10.0.0.66", owner="x")
    _private(session_factory, "report('mine', 1)", ip="10.0.0.7", owner="victim")
    runaway, victim = _claim(session_factory, "w1"), _claim(session_factory, "w2")
    assert runaway is not None and runaway[1] == service.BACKLOG_NICE
    assert victim is not None and victim[1] == service.PRIVATE_NICE


def test_the_private_queue_has_a_cap_per_person_per_address_and_in_all(
    session_factory: sessionmaker[Session],
) -> None:
    caps = service.PrivateCaps(per_owner=2, per_address=3, total=4)
    for i in range(2):
        _private(session_factory, f"report('a', {i})", ip="10.0.0.1", owner="a")

    def check(who: str, ip: str, new: int = 1) -> None:
        with session_scope(session_factory) as s:
            service.check_private_capacity(db_session=s, requested_by=f"learner:{who}",
                                           client_ip=ip, new=new, caps=caps)

    with pytest.raises(RateLimited) as per_owner:
        check("a", "10.0.0.1")
    assert per_owner.value.headers["Retry-After"]
    check("b", "10.0.0.1")  # another learner at the same address: one more fits
    _private(session_factory, "report('b', 1)", ip="10.0.0.1", owner="b")
    with pytest.raises(RateLimited, match="from your network"):
        check("c", "10.0.0.1")
    check("d", "10.0.0.9")
    _private(session_factory, "report('d', 1)", ip="10.0.0.9", owner="d")
    with pytest.raises(Busy):
        check("e", "10.0.0.10")
    # Runs that execute no longer wait: they free their places.
    assert _claim(session_factory, "w") is not None
    check("e", "10.0.0.10")
    with session_scope(session_factory) as s:
        assert s.query(service.Run).filter_by(status=RUN_QUEUED).count() == 3
