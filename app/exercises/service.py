"""Exercises: a learner's own code, run against the exercise's checks.

A Run submits the learner's code once per audited knob combination (with the
exercise's harness appended). Those runs are keyed by the learner (never another
learner's cache hit), queued behind every shared run (app.verify.queue.claim_run), and
rate-limited per learner and per address on their own budget. Checks marked
hidden are counted, never described: nothing here hands their label, expectation
or measurement to a page or the API. A submission whose every check passes is
stored as a correct attempt with its code (app.quizzes).

Checks with `reference: true` compare each run with the reference solution, which the
run's own drivers execute on the same secret data (docs/exercises.md): nothing else is
queued for a learner's Run.
"""

from __future__ import annotations

import difflib
import uuid
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app import ratelimit
from app.accounts import service as accounts
from app.classes.models import KIND_EXERCISES, Assignment, AssignmentQuestion, ClassMember
from app.db import utcnow
from app.errors import Forbidden, InvalidInput, NotFound, TooLarge
from app.exercises.models import ExerciseSubmission
from app.questions.models import STATUS_PUBLISHED, Question, QuestionRevision, Topic
from app.questions.schema import Expectation, QuestionDoc
from app.questions.service import get_published, revision_doc
from app.quizzes import service as practice
from app.quizzes.models import Attempt
from app.verify import service
from app.verify.access import IP_RATE_FACTOR, RATE_WINDOW_SECONDS
from app.verify.engine import SnippetSyntaxError, check_snippet
from app.verify.engine.forbid import learner_part
from app.verify.engine.result import RunResult
from app.verify.expectations import CheckResult, applies, check
from app.verify.gate import ROLE_WRONG, combo_key
from app.verify.gate import planned as gate_plan
from app.verify.models import PRIORITY_PRIVATE, RUN_DONE, RUN_FAILED, Run
from app.verify.results import learner_view, own_frames, result_of

# Learner code is capped at this many bytes of UTF-8.
MAX_CODE_BYTES = 20 * 1024
# Failed Runs after which the learner may open the reference solution (or give up first).
RUNS_BEFORE_SOLUTION = 3


def exercise_doc(*, db_session: Session, slug: str) -> tuple[Question, QuestionRevision, QuestionDoc]:
    """A published exercise, its current revision and document; NotFound otherwise."""
    question = get_published(db_session=db_session, slug=slug)
    if question is None or question.current_revision is None:
        raise NotFound(f"No exercise called {slug!r}.")
    doc = revision_doc(question.current_revision)
    if not doc.is_exercise or doc.verify is None:
        raise NotFound(f"{slug!r} is not an exercise.")
    return question, question.current_revision, doc


def owner_tag(learner_id: str) -> str:
    return f"learner:{learner_id}"


def check_code(code: str) -> str:
    """The code as it will run; TooLarge over the cap. Newlines are normalised (a browser
    form sends CRLF) so the same code typed twice is one cache entry."""
    code = code.replace("\r\n", "\n").replace("\r", "\n")
    size = len(code.encode("utf-8"))
    if size > MAX_CODE_BYTES:
        raise TooLarge(f"Your code is {size:,} bytes; an exercise takes at most "
                       f"{MAX_CODE_BYTES:,} bytes ({MAX_CODE_BYTES // 1024} KB).")
    try:
        check_snippet(code)
    except SnippetSyntaxError as exc:
        # Caught here, not by a worker: code that cannot compile is not worth a queue slot.
        raise InvalidInput(f"Your code does not compile: {exc}") from None
    return code


def submit(
    *, db_session: Session, slug: str, code: str, learner_id: str, client_ip: str,
    limit_per_minute: int, caps: service.PrivateCaps,
) -> list[Run]:
    """Queue (or find again, for this same learner) a run of this code per audited combination.

    Raises NotFound, TooLarge, RateLimited when the new runs would exceed the learner's (or
    the address's) budget of learner-code runs per minute or their share of the waiting
    queue, Busy when the private queue is full.
    """
    _question, revision, doc = exercise_doc(db_session=db_session, slug=slug)
    assert doc.verify is not None
    code = check_code(code)
    torch_v, harness_v = service.engine_versions()
    tag = owner_tag(learner_id)
    # A signed-in class member's runs are their account's share of the private lane, so a
    # class behind one address is served member by member; anyone else's, their address's.
    share = f"account:{learner_id}" if _class_member(db_session, learner_id) else None
    reqs = [service.request_for(doc, combo, torch_version=torch_v, harness_version=harness_v,
                                revision_id=revision.id, requested_by=tag, requested_ip=client_ip,
                                code=service.exercise_code(doc, code), owner=learner_id)
            for combo in doc.verify.audit_combinations()]
    reqs = [replace(r, timeout_s=min(r.timeout_s, caps.learner_timeout_s), share_key=share)
            for r in reqs]
    new = 0
    for req in reqs:
        live = service.find_live(db_session=db_session, key=req.key)
        if live is None or live.status == RUN_FAILED:
            new += 1
    if new:
        message = (f"Too many runs of your code in the last minute (limit {limit_per_minute} runs; "
                   f"this exercise takes {len(reqs)} per Run). Wait a moment and run again.")
        service.check_private_capacity(db_session=db_session, requested_by=tag,
                                       client_ip=client_ip, new=new, caps=caps, share_key=share)
        ratelimit.hit(db_session=db_session, bucket="exercise", key=tag, limit=limit_per_minute,
                      window_s=RATE_WINDOW_SECONDS, cost=new, message=message)
        ratelimit.hit(db_session=db_session, bucket="exercise-ip", key=client_ip,
                      limit=limit_per_minute * IP_RATE_FACTOR, window_s=RATE_WINDOW_SECONDS,
                      cost=new, message=message)
    return [service.request_run(db_session=db_session, req=req)[0] for req in reqs]


def graded(*, db_session: Session, learner_id: str, question_id: int) -> bool:
    """Whether this exercise is graded work for the learner: set in an open exercises
    assignment of a class they are a member of."""
    now = utcnow()
    return db_session.scalar(
        select(ClassMember.id)
        .join(Assignment, Assignment.class_id == ClassMember.class_id)
        .join(AssignmentQuestion, AssignmentQuestion.assignment_id == Assignment.id)
        .where(ClassMember.learner_id == learner_id, ClassMember.left_at.is_(None),
               Assignment.kind == KIND_EXERCISES, Assignment.opens_at <= now,
               AssignmentQuestion.question_id == question_id).limit(1)) is not None


def _class_member(db_session: Session, learner_id: str) -> bool:
    """Whether this learner is a member of some class now (a signed-in learner account)."""
    return db_session.scalar(select(ClassMember.id).where(
        ClassMember.learner_id == learner_id, ClassMember.left_at.is_(None)).limit(1)) is not None


def learner_code(run: Run) -> str:
    """The learner's own code in a run (without the checks)."""
    # The last mark is the real one: the checks never contain it, learner code might.
    return learner_part(run.snippet_text)


@dataclass
class ComboOutcome:
    """One check on one knob combination, as the learner may see it."""

    params: dict[str, Any]
    world_size: int
    result: CheckResult | None  # None while the run is pending or if it could not run


@dataclass
class CheckOutcome:
    """A visible check across every combination it applies to."""

    label: str
    expected: str
    combos: list[ComboOutcome]

    @property
    def done(self) -> bool:
        return all(c.result is not None for c in self.combos)

    @property
    def passed(self) -> bool:
        return self.done and all(c.result is not None and c.result.passed for c in self.combos)

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "expected": self.expected, "passed": self.passed,
                "done": self.done,
                "runs": [{"params": c.params, "world_size": c.world_size,
                          "expected": c.result.expected if c.result else None,
                          "measured": c.result.measured if c.result else None,
                          "passed": c.result.passed if c.result else None} for c in self.combos]}


@dataclass
class Submission:
    """What one Run of an exercise shows: each visible check, and a count of hidden ones."""

    question: Question
    doc: QuestionDoc
    runs: list[Run]
    code: str
    visible: list[CheckOutcome] = field(default_factory=list)
    hidden_total: int = 0
    hidden_passed: int = 0
    attempt_id: int | None = None

    @property
    def done(self) -> bool:
        return all(r.status in (RUN_DONE, RUN_FAILED) for r in self.runs)

    @property
    def infrastructure_failed(self) -> bool:
        return any(r.status == RUN_FAILED for r in self.runs)

    @property
    def passed(self) -> bool:
        return (self.done and not self.infrastructure_failed
                and all(c.passed for c in self.visible) and self.hidden_passed == self.hidden_total)

    @property
    def graded(self) -> bool:
        """Whether a pass is evidence: every run's learner processes ran confined (off the
        sandbox they share the driver's uid, and a pass is shown but not recorded)."""
        results = [result_of(r) for r in self.runs]
        return all(r is not None and r.learner_confined is not False for r in results)

    @property
    def token(self) -> str:
        return "-".join(str(r.id) for r in self.runs)

    @property
    def shown_run(self) -> Run:
        """The run whose verify panel is shown: the first that failed a check, else the first."""
        return next((r for r in self.runs if r.id in self.failing), self.runs[0])

    @property
    def shown_result(self) -> RunResult | None:
        """The shown run's result as the learner may read it: no hidden check's values."""
        result = result_of(self.shown_run)
        return learner_view(result, self.doc) if result is not None else None

    failing: set[int] = field(default_factory=set)
    # The first error of the learner's code (learner frames only), and where they stand.
    error: LearnerError | None = None
    progress: Progress | None = None
    # The known mistakes (their `why`) whose runs measured what this Run measured.
    mistakes: list[str] = field(default_factory=list)


def parse_token(token: str) -> list[int]:
    """Run ids from a submission token such as "12-13-14"; NotFound if it is not one."""
    parts = token.split("-")
    if not parts or len(parts) > 64 or not all(p.isdigit() and 0 < len(p) < 10 for p in parts):
        raise NotFound("No such submission.")
    return [int(p) for p in parts]


def _check(exp: Expectation, run: Run) -> CheckResult | None:
    result = result_of(run)
    return check(exp, result) if result is not None else None


def submission(
    *, db_session: Session, slug: str, token: str, learner_id: str, record: bool = True,
) -> Submission:
    """A learner's submission (its runs named by `token`), checked; only its owner may see it.

    When every run is done and every check passes, the code is stored as a correct
    attempt (once per submission).
    """
    question = get_published(db_session=db_session, slug=slug)
    if question is None:
        raise NotFound(f"No exercise called {slug!r}.")
    runs: list[Run] = []
    for run_id in parse_token(token):
        run = service.get_run(db_session=db_session, run_id=run_id)
        if run is None or run.priority != PRIORITY_PRIVATE \
                or run.requested_by != owner_tag(learner_id):
            raise NotFound("No such submission.")
        runs.append(run)
    revision_ids = {r.question_revision_id for r in runs}
    revision = (db_session.get(QuestionRevision, runs[0].question_revision_id)
                if len(revision_ids) == 1 and runs[0].question_revision_id else None)
    if revision is None or revision.question_id != question.id:
        raise NotFound("No such submission.")
    doc = revision_doc(revision)
    if doc.verify is None or not doc.is_exercise:
        raise NotFound("No such submission.")
    sub = Submission(question, doc, runs, learner_code(runs[0]))
    for exp in doc.verify.expect:
        outcomes = []
        for run in runs:
            if not applies(exp, dict(run.params or {}), run.world_size):
                continue
            res = _check(exp, run)
            if res is not None and not res.passed:
                sub.failing.add(run.id)
            outcomes.append(ComboOutcome(dict(run.params or {}), run.world_size, res))
        if exp.hidden:
            sub.hidden_total += 1
            if outcomes and all(o.result is not None and o.result.passed for o in outcomes):
                sub.hidden_passed += 1
            continue
        expected = outcomes[0].result.expected if outcomes and outcomes[0].result else ""
        sub.visible.append(CheckOutcome(exp.label, expected, outcomes))
    if record and sub.passed and sub.graded:
        attempt = practice.record_exercise_pass(
            db_session=db_session, learner_id=learner_id, question_id=question.id,
            revision_id=revision.id, code=sub.code, token=f"exercise:{sub.token}")
        sub.attempt_id = attempt.id
    if record and sub.done and not sub.infrastructure_failed and sub.graded:
        _record_submission(db_session, learner_id, question.id, sub.token, passed=sub.passed)
    if sub.done and not sub.passed and not sub.infrastructure_failed:
        sub.mistakes = known_mistakes(db_session=db_session, revision=revision, doc=doc, runs=runs)
    sub.error = learner_error([result_of(r) for r in runs])
    sub.progress = progress(db_session=db_session, learner_id=learner_id, question_id=question.id)
    return sub


def _numbers(value: Any) -> list[float] | None:
    """A reported value's numbers in order, or None if it holds anything else."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return [float(value)]
    if isinstance(value, list):
        out: list[float] = []
        for v in value:
            inner = _numbers(v)
            if inner is None:
                return None
            out += inner
        return out
    return None


def _relation(exp: Expectation, result: RunResult) -> str:
    """How a `reference: true` value relates to the reference's on the same data, in terms
    that do not depend on the data: the same, one constant factor off (`x0.5`, a mistake's
    signature: dividing by the world size once too often), or otherwise different."""
    v = exp.value
    if v is None or not v.reference:
        return ""
    ratios: list[float] = []
    for rank in result.ranks:
        if v.rank != "all" and v.rank != rank.rank:
            continue
        mine = _numbers(rank.values.get(v.name))
        theirs = _numbers(rank.reference_values.get(v.reference_name or v.name))
        if mine is None or theirs is None or len(mine) != len(theirs):
            return "differs"
        ratios += [m / t for m, t in zip(mine, theirs, strict=True) if t != 0]
    # Within 1%: a count divided with // is still a factor of the world size off.
    if not ratios or max(ratios) - min(ratios) > 1e-2 * max(abs(r) for r in ratios):
        return "differs"
    return f"x{ratios[0]:.2g}"


def fingerprint(doc: QuestionDoc, run: Run) -> tuple[Any, ...] | None:
    """What a finished run measured, in terms that do not depend on its secret data: how it
    ended, which checks passed (and how a failed value relates to the reference's), which
    collectives each rank made, the errors' types."""
    result = result_of(run)
    if result is None or doc.verify is None:
        return None
    checks = []
    for e in doc.verify.expect:
        if applies(e, dict(run.params or {}), run.world_size):
            passed = check(e, result).passed
            checks.append((passed, "" if passed else _relation(e, result)))
    ops = tuple(tuple(sorted(Counter(str(e.get("op")) for e in rank.events
                                     if e.get("kind") == "collective_start").items()))
                for rank in result.ranks)
    errors = tuple(rank.error.type for rank in result.ranks if rank.error is not None)
    return result.outcome, tuple(checks), ops, errors


def known_mistakes(*, db_session: Session, revision: QuestionRevision, doc: QuestionDoc,
                   runs: list[Run]) -> list[str]:
    """The known-wrong solutions whose runs (the gate's, run and cached by Publish or `bank
    verify`) measured what these runs measured on every combination both have: their `why`,
    never their code. Empty when none matches or the gate has not run them."""
    mine = {combo_key(r.world_size, dict(r.params or {})): fingerprint(doc, r) for r in runs}
    versions = (runs[0].torch_version, runs[0].harness_version)
    found: dict[str, tuple[str, list[bool]]] = {}
    for planned in gate_plan(doc, key=revision.content_hash, revision_id=revision.id,
                             versions=versions):
        if planned.role != ROLE_WRONG or planned.wrong is None:
            continue
        theirs = mine.get(combo_key(planned.req.world_size, planned.req.params))
        if theirs is None:
            continue
        run = service.find_live(db_session=db_session, key=planned.req.key)
        if run is None or run.status != RUN_DONE:
            continue
        found.setdefault(planned.wrong.file, (planned.wrong.why, []))[1].append(
            fingerprint(doc, run) == theirs)
    return [why for why, same in found.values() if same and all(same)][:2]


def _record_submission(db_session: Session, learner_id: str, question_id: int, token: str, *,
                       passed: bool, gave_up: bool = False) -> None:
    if db_session.scalar(select(ExerciseSubmission.id).where(ExerciseSubmission.token == token)):
        return
    accounts.ensure_learner(db_session=db_session, learner_id=learner_id)
    db_session.add(ExerciseSubmission(learner_id=learner_id, question_id=question_id, token=token,
                                      passed=passed, gave_up=gave_up))
    db_session.flush()


@dataclass(frozen=True)
class Progress:
    """Where a learner stands with one exercise."""

    failed_runs: int
    passed: bool
    gave_up: bool

    @property
    def solution_open(self) -> bool:
        """The reference solution may be shown: solved, given up, or tried enough times."""
        return self.passed or self.gave_up or self.failed_runs >= RUNS_BEFORE_SOLUTION

    @property
    def runs_until_solution(self) -> int:
        return 0 if self.solution_open else RUNS_BEFORE_SOLUTION - self.failed_runs


def progress(*, db_session: Session, learner_id: str, question_id: int) -> Progress:
    """The learner's finished Runs of this exercise: how many failed, whether one passed."""
    rows = db_session.execute(
        select(ExerciseSubmission.passed, ExerciseSubmission.gave_up, func.count())
        .where(ExerciseSubmission.learner_id == learner_id,
               ExerciseSubmission.question_id == question_id)
        .group_by(ExerciseSubmission.passed, ExerciseSubmission.gave_up)).all()
    failed = sum(n for passed, gave_up, n in rows if not passed and not gave_up)
    return Progress(failed, any(passed for passed, _, _ in rows),
                    any(gave_up for _, gave_up, _ in rows))


@dataclass(frozen=True)
class Solution:
    """The reference solution as a learner may see it, beside their own last code."""

    code: str
    mine: str
    diff: str


def give_up(*, db_session: Session, slug: str, learner_id: str, code: str) -> Solution:
    """"I give up": recorded as a failed attempt (the card comes back soon); the solution opens."""
    question, revision, _doc = exercise_doc(db_session=db_session, slug=slug)
    code = check_code(code) if code.strip() else ""
    practice.record_exercise_give_up(db_session=db_session, learner_id=learner_id,
                                     question_id=question.id, revision_id=revision.id, code=code,
                                     token=f"exercise-give-up:{uuid.uuid4()}")
    _record_submission(db_session, learner_id, question.id, f"gave-up:{uuid.uuid4()}",
                       passed=False, gave_up=True)
    return solution(db_session=db_session, slug=slug, learner_id=learner_id, code=code)


def solution(*, db_session: Session, slug: str, learner_id: str, code: str | None = None) -> Solution:
    """The reference solution and a diff against the learner's code (their last Run's, unless
    given); Forbidden before the learner solved it, gave up, or failed RUNS_BEFORE_SOLUTION Runs."""
    question, _revision, doc = exercise_doc(db_session=db_session, slug=slug)
    assert doc.exercise is not None
    state = progress(db_session=db_session, learner_id=learner_id, question_id=question.id)
    if not state.solution_open:
        raise Forbidden(f"The solution opens after {RUNS_BEFORE_SOLUTION} failed Runs "
                        f"({state.runs_until_solution} to go), or when you give up.")
    if not state.gave_up and graded(db_session=db_session, learner_id=learner_id,
                                    question_id=question.id):
        # Graded work counts what happened: a solution seen is given up, and a pass after it
        # is not the class's "done" (app.classes.service). Practice keeps its old behaviour.
        _record_submission(db_session, learner_id, question.id, f"solution-viewed:{uuid.uuid4()}",
                           passed=False, gave_up=True)
    if code is None:
        code = last_code(db_session=db_session, learner_id=learner_id, question=question) or \
            (doc.snippet_text or "")
    reference = doc.exercise.solution_code or ""
    diff = "".join(difflib.unified_diff(code.splitlines(keepends=True),
                                        reference.splitlines(keepends=True),
                                        fromfile="your code", tofile="the reference solution"))
    return Solution(reference, code, diff)


def last_code(*, db_session: Session, learner_id: str, question: Question) -> str | None:
    """The learner's own code of their newest Run of this exercise, if any."""
    run = db_session.scalar(
        select(Run).where(Run.requested_by == owner_tag(learner_id), Run.priority == PRIORITY_PRIVATE,
                          Run.question_revision_id.in_(
                              select(QuestionRevision.id).where(QuestionRevision.question_id == question.id)))
        .order_by(Run.requested_at.desc(), Run.id.desc()).limit(1))
    return learner_code(run) if run is not None else None


@dataclass(frozen=True)
class LearnerError:
    """How the learner's code failed on one rank, in the learner's own lines only."""

    rank: int
    type: str
    message: str
    line: int | None
    traceback: str


def learner_error(results: list[RunResult | None]) -> LearnerError | None:
    """The first rank error of these runs, its traceback cut to the learner's own frames (the
    checks program's frames and the harness's never reach the learner)."""
    for result in results:
        for rank in (result.ranks if result is not None else []):
            if rank.error is not None:
                return LearnerError(rank.rank, rank.error.type, rank.error.message,
                                    rank.error.line, own_frames(rank.error.traceback))
    return None


@dataclass
class Solved:
    """The learner's latest passing submission of an exercise."""

    at: datetime
    code: str


def solved(*, db_session: Session, learner_id: str, question_id: int) -> Solved | None:
    """The learner's latest passing code for the exercise, if they have solved it."""
    attempt = db_session.scalar(
        select(Attempt).where(Attempt.learner_id == learner_id, Attempt.question_id == question_id,
                              Attempt.correct.is_(True))
        .order_by(Attempt.created_at.desc(), Attempt.id.desc()).limit(1))
    if attempt is None:
        return None
    answer = attempt.answer
    code = answer.get("code") if isinstance(answer, dict) else None
    return Solved(attempt.created_at, code if isinstance(code, str) else "")


@dataclass
class ExerciseLink:
    slug: str
    title: str


def next_exercise(*, db_session: Session, slug: str) -> ExerciseLink | None:
    """The published exercise after this one (by topic, difficulty, slug), wrapping around."""
    rows = db_session.execute(
        select(Question.slug, Question.title).join(Topic, Topic.slug == Question.topic)
        .where(Question.status == STATUS_PUBLISHED, Question.type == "exercise")
        .order_by(Topic.position, Question.difficulty, Question.slug)).all()
    slugs = [s for s, _ in rows]
    if slug not in slugs or len(slugs) < 2:
        return None
    after, title = rows[(slugs.index(slug) + 1) % len(rows)]
    return ExerciseLink(after, title)
