"""The gate: does a revision's answer key agree with what torch measures?

One rule, used by the author's Publish button and by `ddpdrill bank verify`:
plan the revision's audited knob combinations (the same cache keys either way),
look up each combination's live run, check the expectations that apply to it,
and pass only when every combination has a finished run whose checks all pass
and the expectations are bound to the answer key without disagreement
(`key_binding_problems`: each choice supported or ruled out by a measurement, or
explained; a numeric key equal to the measured value). Both write the outcome as
a `Verdict` with the same shape.

An exercise is gated on each audited combination: its reference solution and every
other right solution (`exercise.right`) must pass every check (visible and hidden);
its starter must fail at least one check somewhere, or there is nothing for the
learner to fix; and each of its known-wrong solutions (`exercise.wrong`) must fail
at least one check somewhere, or the checks let that mistake through (`problems`
names it). Every exercise run carries the reference solution's values, bytes and
memory marks, measured by its drivers on the same data.

A question with variables is gated on every variant: each variant's rendered
document (its variables in the runs' params, its world_size the ranks) times its
audited knob combinations, and every failure names the variant.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.questions.binding import key_binding_problems
from app.questions.models import STATUS_PUBLISHED, Question, QuestionRevision
from app.questions.schema import FieldError, QuestionDoc, RightSolution, WrongSolution
from app.questions.service import render_variant, revision_doc
from app.questions.values import describe_variant, show_value
from app.verify import service
from app.verify.engine.result import RunResult
from app.verify.expectations import CheckResult, evaluate
from app.verify.models import RUN_DONE, RUN_FAILED, RUN_QUEUED, RUN_RUNNING, Run, Verdict
from app.verify.results import result_of

ROLE_QUESTION = "question"
ROLE_REFERENCE = "reference"
ROLE_STARTER = "starter"
ROLE_WRONG = "wrong"
ROLE_RIGHT = "right"
# Roles that must fail a check somewhere (the learner's code is never gated).
_MUST_FAIL = (ROLE_STARTER, ROLE_WRONG)
# Roles that must pass every check on every combination.
_MUST_PASS = (ROLE_REFERENCE, ROLE_RIGHT)


@dataclass
class ComboCheck:
    """One audited knob combination: its run (if any) and the checks that apply to it."""

    params: dict[str, Any]
    world_size: int
    run: Run | None
    result: RunResult | None = None
    checks: list[CheckResult] = field(default_factory=list)
    # "question" (an ordinary snippet), or for an exercise "reference", "right", "starter" or
    # "wrong".
    role: str = ROLE_QUESTION
    # Which variant of a question with variables (None without), and its variables' values.
    variant: int | None = None
    variant_params: dict[str, Any] | None = None
    # For role "wrong" (or "right"): which known-wrong (or other right) solution this is.
    wrong: WrongSolution | RightSolution | None = None
    # The run cache's key of this combination's request.
    key: str = ""
    # A starter's or wrong solution's combination left unrun because another combination
    # already shows that code failing a check, which is all the gate asks of it.
    needless: bool = False

    @property
    def solution(self) -> tuple[str, str | None, int | None]:
        return _solution(self.role, self.wrong, self.variant)

    @property
    def role_label(self) -> str:
        """The role as a person reads it: a wrong (or right) solution by its file."""
        return f"{self.role} {self.wrong.file}" if self.wrong is not None else self.role

    @property
    def where(self) -> str:
        """The combination as a failure names it: its variant, if any, and its knob values."""
        knobs = {k: v for k, v in self.params.items() if k not in (self.variant_params or {})}
        shown = ", ".join(f"{k}={show_value(v)}" for k, v in knobs.items())
        if self.variant is None:
            return shown or "defaults"
        name = describe_variant(self.variant, self.variant_params or {})
        return f"{name}, knobs {shown}" if shown else name

    @property
    def state(self) -> str:
        if self.needless:
            return "not needed: it fails a check on another combination"
        if self.run is None:
            return "not run"
        if self.run.status in (RUN_QUEUED, RUN_RUNNING):
            return self.run.status
        if self.run.status == RUN_FAILED:
            return "infrastructure failure"
        if not self.checks:
            return "no expectation applies"
        if self.role in _MUST_FAIL:
            who = "the starter" if self.role == ROLE_STARTER else "the wrong solution"
            return (f"{who} fails a check, as it must" if self.passed
                    else f"{who} passes every check here")
        return "passed" if self.passed else "failed"

    @property
    def all_checks_pass(self) -> bool:
        return (self.run is not None and self.run.status == RUN_DONE and bool(self.checks)
                and all(c.passed for c in self.checks))

    @property
    def passed(self) -> bool:
        """This combination does what the gate needs of it: every check passes, or for an
        exercise's starter or a wrong solution, at least one check fails."""
        if self.role in _MUST_FAIL:
            return (self.run is not None and self.run.status == RUN_DONE and bool(self.checks)
                    and not all(c.passed for c in self.checks))
        return self.all_checks_pass

    @property
    def pending(self) -> bool:
        return self.run is not None and self.run.status in (RUN_QUEUED, RUN_RUNNING)

    @property
    def failure(self) -> str | None:
        """Why there is no measurement to check, if there is none."""
        if self.needless:
            return None
        if self.run is None:
            return "not run"
        if self.run.status == RUN_FAILED:
            return self.run.failure_reason or "the run did not finish"
        return None

    def to_json(self) -> dict[str, Any]:
        data = {"role": self.role, "params": self.params, "world_size": self.world_size,
                "run_id": self.run.id if self.run else None, "failure": self.failure,
                "checks": [c.to_json() for c in self.checks]}
        if self.variant is not None:
            data.update(variant=self.variant, variant_params=self.variant_params)
        if self.wrong is not None:
            data[self.role] = {"file": self.wrong.file, "why": self.wrong.why}
        if self.needless:
            data["needless"] = True
        if self.result is not None and self.result.tampered:
            data["tampered"] = self.result.tampered
        return data


@dataclass
class Gate:
    """The gate of one revision on one torch version."""

    revision_id: int
    torch_version: str
    combos: list[ComboCheck]
    has_snippet: bool
    binding_problems: list[FieldError] = field(default_factory=list)

    @property
    def is_exercise(self) -> bool:
        return any(c.role == ROLE_STARTER for c in self.combos)

    def wrong_solutions(self) -> list[tuple[WrongSolution, list[ComboCheck]]]:
        """Each known-wrong solution with its combinations, in the exercise's order."""
        out: dict[str, tuple[WrongSolution, list[ComboCheck]]] = {}
        for c in self.combos:
            if c.role == ROLE_WRONG and isinstance(c.wrong, WrongSolution):
                out.setdefault(c.wrong.file, (c.wrong, []))[1].append(c)
        return list(out.values())

    def problems(self) -> list[str]:
        """What the measurement says is wrong with an exercise: a known-wrong solution that
        passes every check on every combination (once all of its runs are done)."""
        out = []
        for wrong, combos in self.wrong_solutions():
            if all(c.run is not None and c.run.status == RUN_DONE and c.all_checks_pass
                   for c in combos):
                out.append(f"the wrong solution {wrong.file} passes every check on every knob "
                           f"combination ({wrong.why})")
        return out

    @property
    def passed(self) -> bool:
        if not (self.has_snippet and self.combos) or self.binding_problems:
            return False
        if self.is_exercise:
            refs = [c for c in self.combos if c.role in _MUST_PASS]
            starters = [c for c in self.combos if c.role == ROLE_STARTER]
            wrongs = all(any(c.passed for c in combos) for _, combos in self.wrong_solutions())
            return (bool(refs) and all(c.passed for c in refs) and any(c.passed for c in starters)
                    and wrongs)
        return all(c.passed for c in self.combos)

    @property
    def pending(self) -> bool:
        return any(c.pending for c in self.combos)

    @property
    def complete(self) -> bool:
        """Every combination has a finished (or permanently failed) run, or needs none."""
        return bool(self.combos) and all(c.needless or (c.run is not None and not c.pending)
                                         for c in self.combos)

    def reason(self) -> str:
        if not self.has_snippet:
            return "this question has no snippet; only an admin may publish it, with an override"
        if self.passed:
            return "every expectation passes on torch " + self.torch_version
        if self.binding_problems:
            n = len(self.binding_problems)
            return (f"the answer key and the expectations disagree ({n} problem"
                    f"{'' if n == 1 else 's'}): " + "; ".join(
                        str(p) for p in self.binding_problems))
        missing = sum(1 for c in self.combos if c.run is None and not c.needless)
        if missing:
            return (f"{_combinations(missing)} not run on torch {self.torch_version} yet: "
                    "press Verify all")
        if self.pending:
            return "runs are still in progress"
        if self.is_exercise:
            bad_ref = sum(1 for c in self.combos if c.role == ROLE_REFERENCE and not c.passed)
            if bad_ref:
                return f"the reference solution fails its checks on {_combinations(bad_ref)}"
            rights = sorted({c.wrong.file for c in self.combos
                             if c.role == ROLE_RIGHT and c.wrong is not None and not c.passed})
            if rights:
                return ("the right solution" + ("s " if len(rights) > 1 else " ")
                        + ", ".join(rights) + " fail" + ("" if len(rights) > 1 else "s")
                        + " a check: the checks reject a correct way of writing it")
            if not any(c.passed for c in self.combos if c.role == ROLE_STARTER):
                return "the starter passes every check: there is nothing for the learner to fix"
            problems = self.problems()
            if problems:
                return "; ".join(problems)
            unproven = [w.file for w, combos in self.wrong_solutions()
                        if not any(c.passed for c in combos)]
            return ("no finished run shows that these wrong solutions fail a check: "
                    + ", ".join(unproven))
        failed = [c for c in self.combos if not c.passed]
        text = f"{_combinations(len(failed))} fail their expectations"
        if any(c.variant is not None for c in failed):
            text += ": " + "; ".join(c.where for c in failed)
        return text


def _combinations(n: int) -> str:
    return f"{n} knob combination" + ("" if n == 1 else "s")


def combo_key(world_size: int, params: dict[str, Any]) -> str:
    """One knob combination as a key: runs of the same combination share it."""
    return json.dumps([world_size, params], sort_keys=True)


@dataclass(frozen=True)
class Planned:
    role: str
    variant: int | None
    doc: QuestionDoc  # the variant's rendered document (the question itself without variables)
    req: service.RunRequest
    wrong: WrongSolution | RightSolution | None = None


def planned(
    doc: QuestionDoc, *, key: str, revision_id: int, versions: tuple[str, str],
    requested_by: str | None = None,
) -> list[Planned]:
    """Every run the gate plans for a revision (each variant, role and audited combination)."""
    return _planned(doc, key=key, revision_id=revision_id, versions=versions,
                    requested_by=requested_by)


def _planned(
    doc: QuestionDoc, *, key: str, revision_id: int, versions: tuple[str, str],
    requested_by: str | None,
) -> list[Planned]:
    if doc.verify is None or doc.snippet_text is None:
        return []
    torch_v, harness_v = versions
    out = []
    for i in range(doc.variant_count):
        variant = render_variant(doc=doc, key=key, variant=i)
        assert variant.verify is not None and variant.snippet_text is not None
        codes: list[tuple[str, str, WrongSolution | RightSolution | None]] = [
            (ROLE_QUESTION, variant.snippet_text, None)]
        if variant.exercise is not None:
            codes = [(ROLE_REFERENCE, service.exercise_code(variant, variant.exercise.solution_code or ""),
                      None),
                     *((ROLE_RIGHT, service.exercise_code(variant, r.code or ""), r)
                       for r in variant.exercise.right),
                     (ROLE_STARTER, service.exercise_code(variant, variant.snippet_text), None),
                     *((ROLE_WRONG, service.exercise_code(variant, w.code or ""), w)
                       for w in variant.exercise.wrong)]
        out += [Planned(role, i if doc.variables else None, variant,
                         service.request_for(variant, combo, torch_version=torch_v,
                                             harness_version=harness_v, revision_id=revision_id,
                                             requested_by=requested_by, code=code), wrong)
                for role, code, wrong in codes for combo in variant.verify.audit_combinations()]
    return out


def _solution(role: str, wrong: WrongSolution | RightSolution | None,
              variant: int | None) -> tuple[str, str | None, int | None]:
    """Which code of a question a combination runs: its role, wrong file and variant."""
    return role, wrong.file if wrong is not None else None, variant


def _first_of_each_solution(planned: list[Planned]) -> list[Planned]:
    """Every combination of the question and of the reference solution, and the first of
    each starter and wrong solution (per variant): the one run that usually shows it fail."""
    seen: set[tuple[str, str | None, int | None]] = set()
    out = []
    for p in planned:
        if p.role in _MUST_FAIL:
            code = _solution(p.role, p.wrong, p.variant)
            if code in seen:
                continue
            seen.add(code)
        out.append(p)
    return out


def plan(
    doc: QuestionDoc, *, revision_id: int, versions: tuple[str, str], requested_by: str | None = None,
) -> list[service.RunRequest]:
    """The run requests of every audited knob combination of every variant of a question (none
    without a snippet); for an exercise, its reference solution's, its starter's and each wrong
    solution's on each combination."""
    return [p.req for p in _planned(doc, key="", revision_id=revision_id, versions=versions,
                                    requested_by=requested_by)]


def request_runs(
    *, db_session: Session, revision: QuestionRevision, versions: tuple[str, str],
    requested_by: str, fresh: bool = False, keep_published: bool = False,
    first_of_each: bool = False, keys: set[str] | None = None,
) -> list[Run]:
    """Queue (or reuse from the cache) a run for every audited combination of a revision.

    `fresh` executes them again; with `keep_published` (an author's request from the web)
    never the runs learners are shown now — the published revision's own combinations,
    which a fresh run would take from them until it finished. `first_of_each` asks only
    the first combination of each starter and wrong solution (`bank verify` asks for the
    rest only for code that did not fail there), and `keys` only those combinations."""
    planned = _planned(revision_doc(revision), key=revision.content_hash, revision_id=revision.id,
                       versions=versions, requested_by=requested_by)
    if first_of_each:
        planned = _first_of_each_solution(planned)
    if keys is not None:
        planned = [p for p in planned if p.req.key in keys]
    shown = _published_keys(db_session, revision, versions) if fresh and keep_published else set()
    return [service.request_run(
        db_session=db_session, req=p.req,
        fresh=fresh and p.req.key not in shown
        and not (keep_published and _shown_elsewhere(db_session, revision, p.req)))[0]
        for p in planned]


def _shown_elsewhere(db_session: Session, revision: QuestionRevision, req: service.RunRequest) -> bool:
    """Whether the finished run of this request is what learners of another published
    question are shown: a copy of that question's snippet, run again with "ignore the
    cache", would otherwise take their run from them until it finished."""
    live = service.find_live(db_session=db_session, key=req.key)
    if live is None or live.status != service.RUN_DONE:
        return False
    made_for = (db_session.get(QuestionRevision, live.question_revision_id)
                if live.question_revision_id else None)
    if made_for is not None and made_for.question_id != revision.question_id:
        owner = db_session.get(Question, made_for.question_id)
        if owner is not None and owner.status == STATUS_PUBLISHED:
            return True
    return service.published_snippet(db_session=db_session, snippet_text=live.snippet_text,
                                     other_than=revision.question_id)


def _published_keys(db_session: Session, revision: QuestionRevision,
                    versions: tuple[str, str]) -> set[str]:
    """The cache keys of the runs learners are shown for this revision's question."""
    question = db_session.get(Question, revision.question_id)
    current = question.current_revision if question is not None else None
    if question is None or current is None or question.status != STATUS_PUBLISHED:
        return set()
    return {p.req.key for p in _planned(revision_doc(current), key=current.content_hash,
                                        revision_id=current.id, versions=versions,
                                        requested_by=None)}


def check(*, db_session: Session, revision: QuestionRevision, versions: tuple[str, str],
          ran: set[int] | None = None) -> Gate:
    """The gate of a revision now: each audited combination's live run and its checks.

    With `ran`, only those runs count (an audit's own), any other live run as none."""
    doc = revision_doc(revision)
    planned = _planned(doc, key=revision.content_hash, revision_id=revision.id, versions=versions,
                       requested_by=None)
    if not planned:
        return Gate(revision.id, versions[0], [], has_snippet=False)
    found = [(p, service.find_live(db_session=db_session, key=p.req.key)) for p in planned]
    if ran is not None:
        found = [(p, run if run is not None and run.id in ran else None) for p, run in found]
    results = [(result_of(run) if run is not None else None) for _, run in found]
    combos = []
    for (p, run), result in zip(found, results, strict=True):
        assert p.doc.verify is not None
        req = p.req
        checks = (evaluate(p.doc.verify.expect, result, req.params, req.world_size, p.doc.trace)
                  if result else [])
        combos.append(ComboCheck(req.params, req.world_size, run, result, checks, p.role, p.variant,
                                 doc.variant_params(p.variant) if p.variant is not None else None,
                                 p.wrong, key=req.key))
    # A starter or wrong solution shown failing on one combination needs no run on the rest.
    proven = {c.solution for c in combos if c.role in _MUST_FAIL and c.passed}
    for c in combos:
        c.needless = c.run is None and c.role in _MUST_FAIL and c.solution in proven
    return Gate(revision.id, versions[0], combos, has_snippet=True,
                binding_problems=key_binding_problems(doc))


def record(*, db_session: Session, gate: Gate) -> Verdict:
    """Store a complete gate's outcome as the revision's newest verdict."""
    return service.record_verdict(db_session=db_session, revision_id=gate.revision_id,
                                  torch_version=gate.torch_version, passed=gate.passed,
                                  checks=[c.to_json() for c in gate.combos])


# The prefill's runs (queued after an import or a publish) are the gate's own combinations: once
# they are all done, the revision's verdict is recorded as `bank verify` would, so no question
# whose every run is cached reads "unverified".
PREFILL = "prefill"


def record_if_complete(*, db_session: Session, revision_id: int,
                       versions: tuple[str, str]) -> Verdict | None:
    """Record the gate's verdict of a revision once every audited combination has a finished
    run on this torch version, unless one is recorded for this version already; the verdict,
    or None when none was recorded."""
    known = db_session.scalar(select(Verdict.id).where(
        Verdict.revision_id == revision_id, Verdict.torch_version == versions[0]).limit(1))
    revision = db_session.get(QuestionRevision, revision_id)
    if known is not None or revision is None:
        return None
    g = check(db_session=db_session, revision=revision, versions=versions)
    if not g.has_snippet or not g.complete:
        return None
    return record(db_session=db_session, gate=g)
