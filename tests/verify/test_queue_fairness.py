"""The queue under an attacker's load: private code (learners' exercises, authors' Run now) never
takes the shared lane, one address runs one private run at a time and waits behind everyone
else's first, a runaway's ranks run at the lowest priority, and the queue has caps.

Claims are made with the real service on the real databases; no engine runs here (the
benchmark benchmarks/queue_fairness.py times the whole path with real ranks).
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.db import session_scope
from app.errors import Busy, RateLimited
from app.verify import queue, service
from app.verify.engine.result import RunResult
from app.verify.models import PRIORITY_PRIVATE, PRIORITY_SHARED, RUN_QUEUED, Run
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
           lane: str = queue.LANE_ANY) -> tuple[int, int] | None:
    with session_scope(factory) as s:
        run = queue.claim_run(db_session=s, worker_id=worker, lease_seconds=60, lane=lane)
        return None if run is None else (run.id, queue.nice_for(db_session=s, run=run))


def test_the_shared_lane_never_takes_private_code(session_factory: sessionmaker[Session]) -> None:
    mine = _private(session_factory, "while True: pass", ip="10.0.0.1", owner="a")
    assert _claim(session_factory, "shared-worker", queue.LANE_SHARED) is None
    bank = _shared(session_factory, "report('x', 1)")
    assert _claim(session_factory, "shared-worker", queue.LANE_SHARED) == (bank, 0)
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
    assert runaway is not None and runaway[1] == queue.BACKLOG_NICE
    assert victim is not None and victim[1] == queue.PRIVATE_NICE


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


def _member_run(factory: sessionmaker[Session], code: str, *, ip: str, member: str) -> int:
    req = dataclasses.replace(make_request(code), owner=member, requested_by=f"learner:{member}",
                              requested_ip=ip, share_key=f"account:{member}")
    with session_scope(factory) as s:
        return service.request_run(db_session=s, req=req)[0].id


def _finish(factory: sessionmaker[Session], run_id: int, worker: str) -> None:
    with session_scope(factory) as s:
        run = s.get(Run, run_id)
        assert run is not None
        assert queue.complete_run(db_session=s, run_id=run_id, worker_id=worker, result=RunResult(
            outcome="ok", diagnosis="done", world_size=run.world_size,
            torch_version=run.torch_version, harness_version=run.harness_version))


def test_thirty_members_behind_one_address_each_start_a_first_run_before_anyones_second(
    session_factory: sessionmaker[Session],
) -> None:
    # Each member presses Run twice in a row; the class shares one address.
    firsts, seconds = set(), set()
    for i in range(30):
        firsts.add(_member_run(session_factory, f"report('a', {i})", ip="10.1.1.1", member=f"m{i}"))
        seconds.add(_member_run(session_factory, f"report('b', {i})", ip="10.1.1.1", member=f"m{i}"))
    started: list[int] = []
    while len(started) < 60:
        claimed = [c for w in ("w1", "w2", "w3") if (c := _claim(session_factory, w)) is not None]
        assert claimed, "the queue stalled"
        started += [run_id for run_id, _nice in claimed]
        with session_scope(session_factory) as s:
            held = {r.id: r.lease_owner for r in s.scalars(select(Run).where(Run.id.in_(
                [c[0] for c in claimed])))}
        for run_id, owner in held.items():
            _finish(session_factory, run_id, str(owner))
    assert set(started[:30]) == firsts and set(started[30:]) == seconds


def test_a_share_that_ran_lately_waits_behind_one_that_did_not(
    session_factory: sessionmaker[Session],
) -> None:
    # Two addresses with backlogs; the first's run executes 20 s, then the other's, then a
    # newcomer arrives: the newcomer's run goes before either backlog's next.
    a = [_private(session_factory, f"report('a', {i})", ip="10.2.0.1", owner=f"a{i}")
         for i in range(3)]
    b = [_private(session_factory, f"report('b', {i})", ip="10.2.0.2", owner=f"b{i}")
         for i in range(3)]
    assert _claim(session_factory, "w1") == (a[0], queue.BACKLOG_NICE)
    assert _claim(session_factory, "w2") == (b[0], queue.BACKLOG_NICE)
    newcomer = _private(session_factory, "report('c', 1)", ip="10.2.0.3", owner="c")
    with session_scope(session_factory) as s:
        run = s.get(Run, a[0])
        assert run is not None and run.started_at is not None
        run.started_at = run.started_at - timedelta(seconds=20)
    _finish(session_factory, a[0], "w1")
    assert _claim(session_factory, "w1") == (newcomer, queue.PRIVATE_NICE)
    # Then the address that has run least lately (b's run is still going, so a's next).
    _finish(session_factory, newcomer, "w1")
    claimed = _claim(session_factory, "w1")
    assert claimed is not None and claimed[0] == a[1]


def test_heavy_shares_take_turns_so_a_worker_stays_free_for_a_newcomer(
    session_factory: sessionmaker[Session],
) -> None:
    a = [_private(session_factory, f"report('a', {i})", ip="10.3.0.1", owner=f"a{i}") for i in range(2)]
    b = [_private(session_factory, f"report('b', {i})", ip="10.3.0.2", owner=f"b{i}") for i in range(2)]
    assert _claim(session_factory, "w1") is not None and _claim(session_factory, "w2") is not None
    with session_scope(session_factory) as s:
        for run in s.scalars(select(Run).where(Run.id.in_([a[0], b[0]]))):
            assert run.started_at is not None
            run.started_at = run.started_at - timedelta(seconds=20)
    _finish(session_factory, a[0], "w1")
    # Both addresses have run 20 s lately and b's run still executes: a's next waits.
    assert _claim(session_factory, "w1") is None
    newcomer = _private(session_factory, "report('c', 1)", ip="10.3.0.3", owner="c")
    assert _claim(session_factory, "w1") == (newcomer, queue.PRIVATE_NICE)
    # Once b's run ends, a heavy share may run again: the one that ran least lately.
    _finish(session_factory, b[0], "w2")
    claimed = _claim(session_factory, "w2")
    assert claimed is not None and claimed[0] in (a[1], b[1])
