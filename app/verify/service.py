"""Runs asked for: the cache key, the request a question and its knobs make, one live run
per key, the private queue's caps, and the gate's verdicts.

A `runs` row is both the job and the cached answer. Its cache key hashes (snippet, world
size, params, torch version, harness version); a unique constraint on (cache_key, live)
makes two concurrent requests for one key share one run. Workers take runs from the queue
(queue.py); a run's result is results.py's.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.errors import Busy, RateLimited
from app.questions.models import STATUS_PUBLISHED, Question, QuestionRevision
from app.questions.schema import QuestionDoc
from app.verify import knobs
from app.verify.engine import HARNESS_VERSION, torch_version
from app.verify.engine.forbid import compose
from app.verify.models import (
    PRIORITY_PRIVATE,
    PRIORITY_SHARED,
    RUN_DONE,
    RUN_FAILED,
    RUN_QUEUED,
    Run,
    Verdict,
)

# PostgreSQL notification channel: a run was queued (workers LISTEN on it).
NOTIFY_CHANNEL = "ddpdrill_runs"


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
    # Whose share of the private lane it is (a class member's account); None: the address.
    share_key: str | None = None

    @property
    def key(self) -> str:
        return cache_key(snippet_text=self.snippet_text, world_size=self.world_size,
                         params=self.params, torch_version=self.torch_version,
                         harness_version=self.harness_version, timeout_s=self.timeout_s,
                         owner=self.owner)

    @property
    def priority(self) -> int:
        return PRIORITY_SHARED if self.owner is None else PRIORITY_PRIVATE


def exercise_code(doc: QuestionDoc, code: str) -> str:
    """What an exercise runs: the given code (the learner's, the starter, the solution or a
    wrong or right solution), then the exercise's options (the forbidden collectives, the
    reference solution, which the driver runs on the same data) and checks program. One
    text, so the cache key covers all of it; the code comes first, so its line numbers stay
    the learner's. The engine hands the learner process only the code and the checks."""
    if doc.exercise is None:
        return code
    return compose(code, doc.exercise.harness_code or "", forbid=doc.exercise.forbid,
                   reference=doc.exercise.solution_code or "",
                   shared_folder=doc.exercise.shared_folder)


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


def find_live(*, db_session: Session, key: str) -> Run | None:
    """The run currently answering this cache key, if any."""
    return db_session.scalar(select(Run).where(Run.cache_key == key, Run.live.is_(True)))


def request_run(*, db_session: Session, req: RunRequest, fresh: bool = False,
                before_new: Callable[[], None] | None = None) -> tuple[Run, bool]:
    """The run for this request and whether it was already there (a cache hit or a shared job).

    `fresh` supersedes a finished run so the snippet executes again (authors only).
    A permanently failed run is superseded too: infrastructure failures are not answers.
    `before_new` is called before a new run is queued (a learner's rate limit: it may raise).
    """
    key = req.key
    existing = find_live(db_session=db_session, key=key)
    if existing is not None:
        stale = existing.status == RUN_FAILED or (fresh and existing.status == RUN_DONE)
        if not stale:
            return existing, True
    if before_new is not None:
        before_new()
    if existing is not None:
        existing.live = None
        db_session.flush()
    run = Run(
        cache_key=key, live=True, question_revision_id=req.question_revision_id,
        snippet_hash=snippet_hash(req.snippet_text), snippet_text=req.snippet_text,
        world_size=req.world_size, params=req.params, timeout_s=req.timeout_s,
        torch_version=req.torch_version, harness_version=req.harness_version,
        requested_by=req.requested_by, requested_ip=req.requested_ip, status=RUN_QUEUED,
        priority=req.priority, share_key=req.share_key,
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
                           new: int, caps: PrivateCaps, share_key: str | None = None) -> None:
    """Refuse `new` more private runs past the queue's caps: RateLimited (429) past this
    person's or this address's share, Busy (503) when the private queue is full for
    everyone. Runs already executing do not count, only those waiting. A signed-in class
    member's runs (`share_key`) are their account's share, not their address's."""
    if new <= 0:
        return
    waiting = select(func.count()).select_from(Run).where(
        Run.priority == PRIORITY_PRIVATE, Run.status == RUN_QUEUED)
    mine = int(db_session.scalar(waiting.where(Run.requested_by == requested_by)) or 0)
    if mine + new > caps.per_owner:
        raise RateLimited(f"You have {mine} runs waiting already (at most {caps.per_owner}); "
                          "wait for them to finish, then run again.", retry_after_s=10)
    here = 0 if share_key is not None else int(db_session.scalar(
        waiting.where(Run.requested_ip == client_ip, Run.share_key.is_(None))) or 0)
    if here + new > caps.per_address:
        raise RateLimited(f"{here} runs from your network are waiting already (at most "
                          f"{caps.per_address}); wait a moment, then run again.", retry_after_s=10)
    if int(db_session.scalar(waiting) or 0) + new > caps.total:
        raise Busy("The queue for learners' code is full right now; try again in a minute.")


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
