"""Exercises: a learner's own code, run against the exercise's checks.

A Run submits the learner's code once per audited knob combination (with the
exercise's harness appended). Those runs are keyed by the learner (never another
learner's cache hit), queued behind every shared run (service.claim_run), and
rate-limited per learner and per address on their own budget. Checks marked
hidden are counted, never described: nothing here hands their label, expectation
or measurement to a page or the API. A submission whose every check passes is
stored as a correct attempt with its code (app.quizzes).

Checks with `reference: true` compare each run with the reference solution's run of
the same combination: a shared, cached run (the gate's own), queued with the
learner's runs if it is missing, never counted against the learner's budget.
"""

from __future__ import annotations

import difflib
import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app import ratelimit
from app.errors import Forbidden, InvalidInput, NotFound, TooLarge
from app.exercises.models import ExerciseSubmission
from app.questions.models import Question, QuestionRevision
from app.questions.schema import Expectation, QuestionDoc
from app.questions.service import get_published, revision_doc
from app.quizzes import service as practice
from app.verify import service
from app.verify.access import IP_RATE_FACTOR, RATE_WINDOW_SECONDS
from app.verify.engine import SnippetSyntaxError, check_snippet
from app.verify.engine.forbid import SNIPPET_FILE, learner_part
from app.verify.engine.result import RunResult
from app.verify.expectations import CheckResult, applies, check
from app.verify.gate import combo_key
from app.verify.models import PRIORITY_PRIVATE, RUN_DONE, RUN_FAILED, Run

# Learner code is capped at this many bytes of UTF-8.
MAX_CODE_BYTES = 20 * 1024
# Failed Runs after which the learner may open the reference solution (or give up first).
RUNS_BEFORE_SOLUTION = 3
# Who asked for a reference run that a learner's submission needed.
REFERENCE_REQUESTER = "exercise-reference"


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
    reqs = [service.request_for(doc, combo, torch_version=torch_v, harness_version=harness_v,
                                revision_id=revision.id, requested_by=tag, requested_ip=client_ip,
                                code=service.exercise_code(doc, code), owner=learner_id)
            for combo in doc.verify.audit_combinations()]
    new = 0
    for req in reqs:
        live = service.find_live(db_session=db_session, key=req.key)
        if live is None or live.status == RUN_FAILED:
            new += 1
    if new:
        message = (f"Too many runs of your code in the last minute (limit {limit_per_minute} runs; "
                   f"this exercise takes {len(reqs)} per Run). Wait a moment and run again.")
        service.check_private_capacity(db_session=db_session, requested_by=tag,
                                       client_ip=client_ip, new=new, caps=caps)
        ratelimit.hit(db_session=db_session, bucket="exercise", key=tag, limit=limit_per_minute,
                      window_s=RATE_WINDOW_SECONDS, cost=new, message=message)
        ratelimit.hit(db_session=db_session, bucket="exercise-ip", key=client_ip,
                      limit=limit_per_minute * IP_RATE_FACTOR, window_s=RATE_WINDOW_SECONDS,
                      cost=new, message=message)
    runs = [service.request_run(db_session=db_session, req=req)[0] for req in reqs]
    for ref in reference_requests(doc, revision_id=revision.id, versions=(torch_v, harness_v)):
        service.request_run(db_session=db_session, req=ref)
    return runs


def uses_reference(doc: QuestionDoc) -> bool:
    """Whether some check of this exercise compares with the reference solution's run."""
    return doc.verify is not None and any(
        e.value is not None and e.value.reference for e in doc.verify.expect)


def reference_requests(
    doc: QuestionDoc, *, revision_id: int, versions: tuple[str, str],
) -> list[service.RunRequest]:
    """The reference solution's run of each audited combination (the gate's same cache keys),
    if a check needs them."""
    if not uses_reference(doc) or doc.exercise is None or doc.verify is None:
        return []
    code = service.exercise_code(doc, doc.exercise.solution_code or "")
    return [service.request_for(doc, combo, torch_version=versions[0], harness_version=versions[1],
                                revision_id=revision_id, requested_by=REFERENCE_REQUESTER,
                                code=code)
            for combo in doc.verify.audit_combinations()]


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
    # The reference solution's runs the checks compare with (never shown to the learner).
    references: list[Run] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return all(r.status in (RUN_DONE, RUN_FAILED) for r in [*self.runs, *self.references])

    @property
    def infrastructure_failed(self) -> bool:
        return any(r.status == RUN_FAILED for r in [*self.runs, *self.references])

    @property
    def passed(self) -> bool:
        return (self.done and not self.infrastructure_failed
                and all(c.passed for c in self.visible) and self.hidden_passed == self.hidden_total)

    @property
    def token(self) -> str:
        return "-".join(str(r.id) for r in self.runs)

    @property
    def shown_run(self) -> Run:
        """The run whose verify panel is shown: the first that failed a check, else the first."""
        return next((r for r in self.runs if r.id in self.failing), self.runs[0])

    failing: set[int] = field(default_factory=set)
    # The first error of the learner's code (learner frames only), and where they stand.
    error: LearnerError | None = None
    progress: Progress | None = None


def parse_token(token: str) -> list[int]:
    """Run ids from a submission token such as "12-13-14"; NotFound if it is not one."""
    parts = token.split("-")
    if not parts or len(parts) > 64 or not all(p.isdigit() and 0 < len(p) < 10 for p in parts):
        raise NotFound("No such submission.")
    return [int(p) for p in parts]


def _check(exp: Expectation, run: Run, references: dict[str, Run]) -> CheckResult | None:
    result = service.result_of(run)
    if result is None:
        return None
    reference: RunResult | None = None
    if exp.value is not None and exp.value.reference:
        ref_run = references.get(combo_key(run.world_size, dict(run.params or {})))
        reference = service.result_of(ref_run) if ref_run is not None else None
        if reference is None:
            return None  # the reference run is still queued (or failed: infrastructure)
    return check(exp, result, reference)


def _references(*, db_session: Session, doc: QuestionDoc, revision_id: int,
                runs: list[Run]) -> dict[str, Run]:
    """The reference run of each of these runs' combinations, queued again if it is gone."""
    out: dict[str, Run] = {}
    versions = (runs[0].torch_version, runs[0].harness_version)
    for req in reference_requests(doc, revision_id=revision_id, versions=versions):
        ref = service.find_live(db_session=db_session, key=req.key)
        if ref is None:
            ref = service.request_run(db_session=db_session, req=req)[0]
        out[combo_key(req.world_size, req.params)] = ref
    return out


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
    references = _references(db_session=db_session, doc=doc, revision_id=revision.id, runs=runs)
    sub = Submission(question, doc, runs, learner_code(runs[0]), references=list(references.values()))
    for exp in doc.verify.expect:
        outcomes = []
        for run in runs:
            if not applies(exp, dict(run.params or {}), run.world_size):
                continue
            res = _check(exp, run, references)
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
    if record and sub.passed:
        attempt = practice.record_exercise_pass(
            db_session=db_session, learner_id=learner_id, question_id=question.id,
            revision_id=revision.id, code=sub.code, token=f"exercise:{sub.token}")
        sub.attempt_id = attempt.id
    if record and sub.done and not sub.infrastructure_failed:
        _record_submission(db_session, learner_id, question.id, sub.token, passed=sub.passed)
    sub.error = learner_error([service.result_of(r) for r in runs])
    sub.progress = progress(db_session=db_session, learner_id=learner_id, question_id=question.id)
    return sub


def _record_submission(db_session: Session, learner_id: str, question_id: int, token: str, *,
                       passed: bool, gave_up: bool = False) -> None:
    if db_session.scalar(select(ExerciseSubmission.id).where(ExerciseSubmission.token == token)):
        return
    practice.ensure_learner(db_session=db_session, learner_id=learner_id)
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


def own_frames(traceback: str) -> str:
    """A Python traceback with only the frames of the learner's file (snippet.py) kept."""
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
