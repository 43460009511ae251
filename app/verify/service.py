"""Runs as a cached job queue: request, claim with a lease, renew, complete, fail, release.

A `runs` row is both the job and the cached answer. Its cache key hashes
(snippet, world size, params, torch version, harness version); a unique
constraint on (cache_key, live) makes two concurrent requests for one key
share one run. Workers claim with `FOR UPDATE SKIP LOCKED` on PostgreSQL and a
single atomic UPDATE on SQLite, and hold a lease they renew; a run whose lease
ran out (its worker died) is claimed again.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from pydantic import ValidationError
from sqlalchemy import and_, case, func, literal, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, aliased

from app import metrics
from app.db import utcnow
from app.errors import Busy, RateLimited
from app.questions.models import STATUS_PUBLISHED, Question, QuestionRevision
from app.questions.schema import QuestionDoc
from app.verify import knobs
from app.verify.engine import HARNESS_VERSION, torch_version
from app.verify.engine.forbid import CHECKS_MARK, SNIPPET_FILE, compose
from app.verify.engine.result import RankResult, RunResult
from app.verify.models import (
    PRIORITY_PRIVATE,
    PRIORITY_SHARED,
    RUN_DONE,
    RUN_FAILED,
    RUN_QUEUED,
    RUN_RUNNING,
    Run,
    Verdict,
)

# An infrastructure failure (worker died, pool broke) is retried this many times in all.
MAX_ATTEMPTS = 3
# PostgreSQL notification channel: a run was queued (workers LISTEN on it).
NOTIFY_CHANNEL = "ddpdrill_runs"
# Results above this size are trimmed (events first) before they are stored.
MAX_RESULT_BYTES = 2 * 1024 * 1024
# Key of the PostgreSQL advisory lock private claims take turns under.
PRIVATE_CLAIM_LOCK = 0x5DD9_0001


class InvalidResult(ValueError):
    """A worker returned something that is not a valid run result."""


def cache_key(
    *, snippet_text: str, world_size: int, params: dict[str, Any], torch_version: str,
    harness_version: str, timeout_s: float, owner: str | None = None,
) -> str:
    """The hash that identifies a run's answer.

    The timeout is part of it: it sets the gloo group's own timeout, so a hang's
    measured error (and whether a slow run finishes) depends on it. `owner` names the
    learner whose own code this is: their runs are never another learner's cache hit.
    """
    body: dict[str, Any] = {
        "snippet": snippet_text, "world_size": world_size, "params": params,
        "torch": torch_version, "harness": harness_version, "timeout_s": float(timeout_s)}
    if owner is not None:
        body["owner"] = owner
    payload = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


def engine_versions() -> tuple[str, str]:
    """(torch version, harness version): the part of every cache key that names the engine."""
    return torch_version(), HARNESS_VERSION


def published_snippet(*, db_session: Session, snippet_text: str, other_than: int | None = None) -> bool:
    """Whether some published question (other than `other_than`) shows learners this very
    snippet in its current revision: its runs, whoever first asked for them, are theirs."""
    stmt = (select(Question.id).join(QuestionRevision, QuestionRevision.id == Question.current_revision_id)
            .where(Question.status == STATUS_PUBLISHED, QuestionRevision.snippet_text == snippet_text))
    if other_than is not None:
        stmt = stmt.where(Question.id != other_than)
    return db_session.scalar(stmt.limit(1)) is not None


def snippet_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class RunRequest:
    snippet_text: str
    world_size: int
    params: dict[str, Any]
    timeout_s: float
    torch_version: str
    harness_version: str
    question_revision_id: int | None = None
    requested_by: str | None = None
    requested_ip: str | None = None
    # The learner whose own code this is (exercises): keyed and queued apart.
    owner: str | None = None

    @property
    def key(self) -> str:
        return cache_key(snippet_text=self.snippet_text, world_size=self.world_size,
                         params=self.params, torch_version=self.torch_version,
                         harness_version=self.harness_version, timeout_s=self.timeout_s,
                         owner=self.owner)

    @property
    def priority(self) -> int:
        return PRIORITY_SHARED if self.owner is None else PRIORITY_PRIVATE


HARNESS_MARK = CHECKS_MARK


def learner_view(result: RunResult, doc: QuestionDoc | None) -> RunResult:
    """An exercise run's result as its learner may read it. The run carries the checks'
    reports too: the learner keeps the values the visible checks read and their own reports,
    never what a hidden check measured (its name and value would describe the check)."""
    visible = {e.value.name for e in (doc.verify.expect if doc is not None and doc.verify else [])
               if e.value is not None and not e.hidden}

    def kept(event: dict[str, Any]) -> bool:
        return not (event.get("kind") == "report" and event.get("source") == "checks"
                    and event.get("name") not in visible)

    def trimmed(rank: RankResult) -> dict[str, Any]:
        update: dict[str, Any] = {
            "values": {k: v for k, v in rank.values.items() if k in visible},
            "events": [e for e in rank.events if kept(e)],
            # The checks' own lines (their file is not the learner's) never reach the page.
            "stack": own_frames(rank.stack) if rank.stack else rank.stack}
        if rank.error is not None:
            update["error"] = rank.error.model_copy(
                update={"traceback": own_frames(rank.error.traceback)})
        return update

    return result.model_copy(update={"ranks": [rank.model_copy(update=trimmed(rank))
                                               for rank in result.ranks]})


def own_frames(traceback: str) -> str:
    """A Python traceback (or stack) with only the frames of the learner's file kept: the
    harness's and the checks' frames, and their source lines, are left out."""
    out: list[str] = []
    keep = False
    for line in traceback.splitlines():
        if line.startswith("  File "):
            keep = line.startswith(f'  File "{SNIPPET_FILE}"')
            if keep:
                out.append(line)
        elif line.startswith("    "):
            if keep:
                out.append(line)
        else:
            keep = False
            out.append(line)
    return "\n".join(out)


def exercise_code(doc: QuestionDoc, code: str) -> str:
    """What an exercise runs: the given code (the learner's, the starter, the solution or a
    wrong solution), then the exercise's options and checks program, which the rank runs
    apart from it (app.verify.engine.forbid). One text, so the cache key covers all of it;
    the code comes first, so its line numbers stay the learner's."""
    if doc.exercise is None:
        return code
    return compose(code, doc.exercise.harness_code or "", forbid=doc.exercise.forbid)


def request_for(
    doc: QuestionDoc, raw_params: dict[str, Any] | None, *, torch_version: str,
    harness_version: str, revision_id: int | None = None, requested_by: str | None = None,
    requested_ip: str | None = None, code: str | None = None, owner: str | None = None,
) -> RunRequest:
    """The run request for a question and knob values (validated; raises knobs.InvalidKnob).

    `code` replaces the question's snippet (an exercise's solution, or a learner's code
    with its harness); `owner` marks the code as that learner's own.
    """
    assert doc.verify is not None and doc.snippet_text is not None
    world_size, params = knobs.resolve(doc.verify, raw_params)
    return RunRequest(snippet_text=doc.snippet_text if code is None else code,
                      world_size=world_size, params=params,
                      timeout_s=doc.verify.timeout_s, torch_version=torch_version,
                      harness_version=harness_version, question_revision_id=revision_id,
                      requested_by=requested_by, requested_ip=requested_ip, owner=owner)


def get_run(*, db_session: Session, run_id: int) -> Run | None:
    """The run with this id."""
    return db_session.get(Run, run_id)


def result_of(run: Run) -> RunResult | None:
    """A finished run's measured result, typed (stored results were validated on the way in)."""
    if run.status != RUN_DONE or run.result is None:
        return None
    return RunResult.model_validate(run.result)


def find_live(*, db_session: Session, key: str) -> Run | None:
    """The run currently answering this cache key, if any."""
    return db_session.scalar(select(Run).where(Run.cache_key == key, Run.live.is_(True)))


def request_run(*, db_session: Session, req: RunRequest, fresh: bool = False) -> tuple[Run, bool]:
    """The run for this request and whether it was already there (a cache hit or a shared job).

    `fresh` supersedes a finished run so the snippet executes again (authors only).
    A permanently failed run is superseded too: infrastructure failures are not answers.
    """
    key = req.key
    existing = find_live(db_session=db_session, key=key)
    if existing is not None:
        stale = existing.status == RUN_FAILED or (fresh and existing.status == RUN_DONE)
        if not stale:
            return existing, True
        existing.live = None
        db_session.flush()
    run = Run(
        cache_key=key, live=True, question_revision_id=req.question_revision_id,
        snippet_hash=snippet_hash(req.snippet_text), snippet_text=req.snippet_text,
        world_size=req.world_size, params=req.params, timeout_s=req.timeout_s,
        torch_version=req.torch_version, harness_version=req.harness_version,
        requested_by=req.requested_by, requested_ip=req.requested_ip, status=RUN_QUEUED,
        priority=req.priority,
    )
    try:
        with db_session.begin_nested():
            db_session.add(run)
            db_session.flush()
    except IntegrityError:
        # Another request inserted the same key between our read and our insert.
        winner = find_live(db_session=db_session, key=key)
        if winner is None:
            raise
        return winner, True
    notify_queued(db_session=db_session)
    return run, False


def notify_queued(*, db_session: Session) -> None:
    """Wake every worker of every process when this transaction commits (PostgreSQL only).

    On SQLite the workers of the requesting process are woken by an event; others poll.
    """
    if db_session.get_bind().dialect.name == "postgresql":
        db_session.execute(select(func.pg_notify(NOTIFY_CHANNEL, "")))


@dataclass(frozen=True)
class PrivateCaps:
    """How many private runs may wait at once: per person, per address, in all."""

    per_owner: int
    per_address: int
    total: int
    # The longest a learner's own run may take (an exercise's timeout_s is cut to it).
    learner_timeout_s: float = 20.0

    @classmethod
    def from_settings(cls, settings: Any) -> PrivateCaps:
        return cls(settings.private_queue_per_owner, settings.private_queue_per_address,
                   settings.private_queue_total, float(settings.learner_run_timeout_s))


def check_private_capacity(*, db_session: Session, requested_by: str, client_ip: str,
                           new: int, caps: PrivateCaps) -> None:
    """Refuse `new` more private runs past the queue's caps: RateLimited (429) past this
    person's or this address's share, Busy (503) when the private queue is full for
    everyone. Runs already executing do not count, only those waiting."""
    if new <= 0:
        return
    waiting = select(func.count()).select_from(Run).where(
        Run.priority == PRIORITY_PRIVATE, Run.status == RUN_QUEUED)
    mine = int(db_session.scalar(waiting.where(Run.requested_by == requested_by)) or 0)
    if mine + new > caps.per_owner:
        raise RateLimited(f"You have {mine} runs waiting already (at most {caps.per_owner}); "
                          "wait for them to finish, then run again.", retry_after_s=10)
    here = int(db_session.scalar(waiting.where(Run.requested_ip == client_ip)) or 0)
    if here + new > caps.per_address:
        raise RateLimited(f"{here} runs from your network are waiting already (at most "
                          f"{caps.per_address}); wait a moment, then run again.", retry_after_s=10)
    if int(db_session.scalar(waiting) or 0) + new > caps.total:
        raise Busy("The queue for learners' code is full right now; try again in a minute.")


def queue_state(*, db_session: Session) -> dict[str, Any]:
    """Runs by status, the queue's depth and how many workers hold a live lease (for /metrics)."""
    by_status = {str(st): int(n) for st, n in db_session.execute(
        select(Run.status, func.count()).group_by(Run.status)).all()}
    busy = db_session.scalar(select(func.count(func.distinct(Run.lease_owner))).where(
        Run.status == RUN_RUNNING, Run.lease_expires_at >= utcnow()))
    return {"by_status": by_status, "queued": by_status.get(RUN_QUEUED, 0),
            "busy_workers": int(busy or 0)}


def has_claimable(*, db_session: Session, shared_only: bool = False) -> bool:
    """True when some run waits for a worker (of the shared lane only, if asked); a read."""
    stmt = select(Run.id).where(_claimable(utcnow()))
    if shared_only:
        stmt = stmt.where(Run.priority == PRIORITY_SHARED)
    return db_session.scalar(stmt.limit(1)) is not None


def next_lease_expiry(*, db_session: Session) -> Any:
    """When the soonest lease of a running run ends, or None."""
    return db_session.scalar(select(func.min(Run.lease_expires_at)).where(Run.status == RUN_RUNNING))


def _claimable(now: Any) -> Any:
    return or_(
        Run.status == RUN_QUEUED,
        and_(Run.status == RUN_RUNNING, Run.lease_expires_at < now),
    )


# Worker lanes: a "shared" worker claims only shared runs, so learners' and authors' own
# code can never hold up the bank's Verify; an "any" worker takes shared runs first and
# then private ones.
LANE_SHARED = "shared"
LANE_ANY = "any"
# Niceness of a private run's ranks: below the bank's runs always, and lowest of all for an
# address that has more private runs waiting (a burst, or a runaway), so that another
# learner's run, started beside it, gets most of the CPU.
PRIVATE_NICE = 10
BACKLOG_NICE = 19


def claim_run(*, db_session: Session, worker_id: str, lease_seconds: float,
              lane: str = LANE_ANY) -> Run | None:
    """Take the next run for this worker's lane and lease it to this worker.

    Shared runs first, oldest first. Then (lane "any") a private run, fairly: at most one
    private run per client address executes at a time, and among the waiting ones the
    address's first waits for nobody's second (ordered by each run's place in its own
    address's queue, then by age). A run whose lease ran out (its worker died) is
    claimable again, first of its kind.
    """
    expire_stale_leases(db_session=db_session)
    now = utcnow()
    run = _pick(db_session, now, shared=True)
    if run is None and lane == LANE_ANY:
        run = _pick(db_session, now, shared=False)
    if run is None:
        return None
    if run.status == RUN_RUNNING:
        metrics.LEASE_RECLAIMS.inc()
    run.status, run.lease_owner = RUN_RUNNING, worker_id
    # The worker executes what it claims straight away: the run starts now.
    run.lease_expires_at, run.claimed_at, run.started_at = (
        now + timedelta(seconds=lease_seconds), now, now)
    run.attempts += 1
    db_session.flush()
    return run


def nice_for(*, db_session: Session, run: Run) -> int:
    """The niceness a claimed run's ranks get: 0 for shared runs; for private ones, lower
    than the bank's always, and lowest when the same address has more waiting."""
    if run.priority != PRIORITY_PRIVATE:
        return 0
    return BACKLOG_NICE if _waiting_from(db_session, run) else PRIVATE_NICE


def _address(column: Any) -> Any:
    return func.coalesce(column, "")


def _pick(db_session: Session, now: Any, *, shared: bool) -> Run | None:
    """The next claimable run of one lane, locked for this transaction (on SQLite the
    transaction already holds the write lock from its start, BEGIN IMMEDIATE)."""
    postgres = db_session.get_bind().dialect.name == "postgresql"
    if shared:
        order: Any = (Run.requested_at, Run.id)
        stmt = select(Run.id).where(_claimable(now), Run.priority == PRIORITY_SHARED)
    else:
        if postgres:
            # Private claims take turns across workers, so two cannot both start a second
            # run of one address between their reads and their writes.
            db_session.execute(select(func.pg_advisory_xact_lock(PRIVATE_CLAIM_LOCK)))
        other = aliased(Run)
        running_here = select(other.id).where(
            other.priority == PRIORITY_PRIVATE, other.status == RUN_RUNNING,
            other.lease_expires_at >= now,
            _address(other.requested_ip) == _address(Run.requested_ip)).exists()
        place = func.row_number().over(partition_by=_address(Run.requested_ip),
                                       order_by=(Run.requested_at, Run.id)).label("place")
        waiting = (select(Run.id, Run.requested_at, place)
                   .where(_claimable(now), Run.priority == PRIORITY_PRIVATE, ~running_here)
                   .subquery())
        order = (waiting.c.place, waiting.c.requested_at, waiting.c.id)
        stmt = select(waiting.c.id)
    for _ in range(8):  # another worker may hold the first candidate (PostgreSQL)
        run_id = db_session.scalar(stmt.order_by(*order).limit(1))
        if run_id is None:
            return None
        locked = select(Run).where(Run.id == run_id, _claimable(now))
        if postgres:
            locked = locked.with_for_update(skip_locked=True)
        run = db_session.scalar(locked)
        if run is not None:
            return run
        stmt = stmt.where(Run.id != run_id) if shared else stmt.where(waiting.c.id != run_id)
    return None


def _waiting_from(db_session: Session, run: Run) -> bool:
    """Whether the run's address has more private runs waiting behind this one."""
    return db_session.scalar(select(Run.id).where(
        Run.priority == PRIORITY_PRIVATE, Run.status == RUN_QUEUED, Run.id != run.id,
        _address(Run.requested_ip) == _address(literal(run.requested_ip))).limit(1)) is not None


def renew_lease(*, db_session: Session, run_id: int, worker_id: str, lease_seconds: float) -> bool:
    """Extend this worker's lease; False if the run is no longer this worker's."""
    res = db_session.execute(
        update(Run).where(Run.id == run_id, Run.lease_owner == worker_id,
                          Run.status == RUN_RUNNING)
        .values(lease_expires_at=utcnow() + timedelta(seconds=lease_seconds))
    )
    return bool(res.rowcount)  # type: ignore[attr-defined]


def validate_result(result: RunResult | dict[str, Any]) -> dict[str, Any]:
    """A result as stored: checked against the engine's model (a RunResult the engine built
    already is) and capped in size; raises InvalidResult."""
    if isinstance(result, RunResult):
        try:
            return cap_result(result.model_dump(mode="json"))
        except (ValueError, TypeError) as exc:  # a value that will not serialise
            raise InvalidResult(f"the result could not be stored: {exc}") from exc
    try:
        data = RunResult.model_validate(result).model_dump(mode="json")
    except ValidationError as exc:
        raise InvalidResult(f"result does not match the run result schema: {exc}") from exc
    return cap_result(data)


def cap_result(data: dict[str, Any], limit: int = MAX_RESULT_BYTES) -> dict[str, Any]:
    """Trim a result until its JSON fits in `limit` bytes, saying what was dropped.

    Events go first (the later half of the longest list, repeatedly), then output,
    bucket records and finally oversized reported values, which become a short note.
    """
    # The JSON's length, encoded again only after something was cut (most results fit as
    # they are, and encoding a large one is most of storing it).
    measured: list[int] = []

    def size() -> int:
        if not measured:
            measured.append(len(json.dumps(data)))
        return measured[0]

    def cut() -> None:
        measured.clear()

    notes: list[str] = []
    ranks = data.get("ranks") or []
    dropped = 0
    while size() > limit:
        longest = max(ranks, key=lambda r: len(r.get("events") or []), default=None)
        if not longest or len(longest.get("events") or []) <= 10:
            break
        events = longest["events"]
        keep = len(events) // 2
        dropped += len(events) - keep
        longest["events"] = events[:keep]
        cut()
    if dropped:
        notes.append(f"{dropped} later events dropped")
    if size() > limit:
        for r in ranks:
            r["stdout"] = (r.get("stdout") or "")[:1024]
            r["stderr"] = (r.get("stderr") or "")[:1024]
            r["stack"] = (r.get("stack") or "")[:1024] or None
        data["buckets"] = (data.get("buckets") or [])[:200]
        cut()
        notes.append("output and bucket records shortened")
    # An exercise learner's own reports before the checks' (no check reads them).
    for field_name in ("learner_values", "values"):
        if size() <= limit:
            break
        values = [(len(json.dumps(v)), r, name) for r in ranks
                  for name, v in (r.get(field_name) or {}).items()]
        for nbytes, r, name in sorted(values, key=lambda t: t[0], reverse=True):
            if size() <= limit:
                break
            r[field_name][name] = f"(not stored: {nbytes} bytes of JSON)"
            cut()
        notes.append("the largest reported values replaced by their size")
    if size() > limit:
        for r in ranks:
            r["events"] = []
        cut()
        notes.append("all events dropped")
    if notes:
        data["diagnosis"] = (data.get("diagnosis") or "") + (
            f" (Stored result trimmed to fit {limit} bytes: {'; '.join(notes)}.)")
    return data


def complete_run(*, db_session: Session, run_id: int, worker_id: str,
                 result: RunResult | dict[str, Any]) -> bool:
    """Store a validated result and mark the run done; False if the lease was lost."""
    data = validate_result(result)
    res = db_session.execute(
        update(Run).where(Run.id == run_id, Run.lease_owner == worker_id,
                          Run.status == RUN_RUNNING)
        .values(status=RUN_DONE, result=data, finished_at=utcnow(), lease_owner=None,
                lease_expires_at=None, failure_reason=None)
    )
    return bool(res.rowcount)  # type: ignore[attr-defined]


def fail_attempt(*, db_session: Session, run_id: int, worker_id: str, reason: str) -> str | None:
    """An infrastructure failure: queue the run again, or fail it after MAX_ATTEMPTS."""
    # One conditional UPDATE: a worker whose lease has passed to another must not
    # touch the new owner's claim.
    now = utcnow()
    status = db_session.scalar(
        update(Run).where(Run.id == run_id, Run.lease_owner == worker_id, Run.status == RUN_RUNNING)
        .values(failure_reason=reason[:2000], lease_owner=None, lease_expires_at=None,
                status=case((Run.attempts >= MAX_ATTEMPTS, RUN_FAILED), else_=RUN_QUEUED),
                finished_at=case((Run.attempts >= MAX_ATTEMPTS, now), else_=None))
        .returning(Run.status)
    )
    return str(status) if status is not None else None


def release_run(*, db_session: Session, run_id: int, worker_id: str) -> None:
    """Give a claimed run back without counting an attempt (a worker shutting down)."""
    db_session.execute(
        update(Run).where(Run.id == run_id, Run.lease_owner == worker_id,
                          Run.status == RUN_RUNNING)
        .values(status=RUN_QUEUED, lease_owner=None, lease_expires_at=None,
                attempts=Run.attempts - 1)
    )


def expire_stale_leases(*, db_session: Session) -> int:
    """Fail runs whose lease ran out after their last allowed attempt; returns how many."""
    now = utcnow()
    res = db_session.execute(
        update(Run).where(Run.status == RUN_RUNNING, Run.lease_expires_at < now,
                          Run.attempts >= MAX_ATTEMPTS)
        .values(status=RUN_FAILED, finished_at=now, lease_owner=None,
                failure_reason="the worker running it stopped responding")
    )
    return int(res.rowcount)  # type: ignore[attr-defined]


def record_verdict(
    *, db_session: Session, revision_id: int, torch_version: str, passed: bool,
    checks: list[dict[str, Any]],
) -> Verdict:
    """Store the outcome of auditing a revision's expectations."""
    verdict = Verdict(revision_id=revision_id, torch_version=torch_version, passed=passed,
                      checks=checks)
    db_session.add(verdict)
    db_session.flush()
    return verdict


def latest_verdict(*, db_session: Session, revision_id: int) -> Verdict | None:
    """The most recent audit verdict of a revision."""
    return db_session.scalar(
        select(Verdict).where(Verdict.revision_id == revision_id)
        .order_by(Verdict.created_at.desc(), Verdict.id.desc()).limit(1)
    )
