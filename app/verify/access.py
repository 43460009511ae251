"""Who may run and see what: a learner's Verify, the runs they may read, and what a run panel
shows them.

Learners run and see only what they can see as learners: a published question's
current revision, or an older revision one of their own quizzes is pinned to;
never a draft. Signed-in authors and admins see every run. Fresh runs are
rate-limited per learner and, more loosely, per client address; cached runs are
free. Errors are domain errors (app.errors, knobs.InvalidKnob); views map them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from app import ratelimit, reveal
from app.errors import Conflict, NotFound
from app.questions.models import STATUS_PUBLISHED, Question, QuestionRevision
from app.questions.schema import QuestionDoc
from app.questions.service import get_published, revision_doc, revision_variant
from app.questions.values import same_value
from app.quizzes import service as practice
from app.render.runs import Change, compare
from app.verify import results, service
from app.verify.engine.result import RunResult
from app.verify.expectations import CheckResult, ChoiceEvidence, choice_evidence, evaluate
from app.verify.models import PRIORITY_PRIVATE, RUN_DONE, Run


class AnswerFirst(Conflict):
    """A run (a measurement) asked for before the learner answered the question."""


# Fresh runs per learner are counted over this window.
RATE_WINDOW_SECONDS = 60
# The per-address limit is this many times the per-learner one: a classroom behind
# one NAT shares an address, and a cookie is free to drop.
IP_RATE_FACTOR = 4


def pick_revision(
    *, db_session: Session, question: Question, revision_id: int | None, learner_id: str,
) -> QuestionRevision:
    """The question's published revision, or an older one this learner's quiz is pinned to."""
    if revision_id is not None and revision_id != question.current_revision_id:
        revision = db_session.get(QuestionRevision, revision_id)
        if (revision is None or revision.question_id != question.id
                or not practice.is_pinned(db_session=db_session, learner_id=learner_id,
                                          revision_id=revision.id)):
            raise NotFound("No such revision of this question.")
        return revision
    assert question.current_revision is not None
    return question.current_revision


@dataclass(frozen=True)
class Runnable:
    """What a learner's Verify runs: the question, the revision, the variant and its document
    (a variant's values are in its `verify.params`, its world size in `verify.world_size`,
    so its runs and their cache keys are that variant's)."""

    question: Question
    revision: QuestionRevision
    variant: int
    doc: QuestionDoc

    @property
    def has_variables(self) -> bool:
        return bool(revision_doc(self.revision).variables)


def runnable(
    *, db_session: Session, slug: str, revision_id: int | None, learner_id: str,
    variant: int | None = None, allow_exercise: bool = False,
) -> Runnable:
    """The revision and variant a learner's Verify runs, loaded once: `variant` (NoSuchVariant,
    422, if the question has no such variant), else the one the learner is shown now."""
    question = get_published(db_session=db_session, slug=slug)
    if question is None or question.current_revision is None:
        raise NotFound(f"No question called {slug!r}.")
    revision = pick_revision(db_session=db_session, question=question, revision_id=revision_id,
                             learner_id=learner_id)
    template = revision_doc(revision)
    if variant is None:
        variant = practice.drawn_variant(db_session=db_session, learner_id=learner_id,
                                         question_id=question.id, count=template.variant_count)
    variant = practice.check_variant(template, variant)
    doc = revision_variant(revision=revision, variant=variant)
    if doc.verify is None or doc.snippet_text is None:
        raise NotFound("This question has no snippet to run.")
    if doc.is_exercise and not allow_exercise:
        # An exercise runs the learner's code on its own page (app.exercises.service).
        raise NotFound("This is an exercise: run your code on its page.")
    return Runnable(question, revision, variant, doc)


def _may_measure(db_session: Session, target: Runnable, learner_id: str, now: datetime,
                 is_author: bool) -> bool:
    return reveal.may_reveal(db_session=db_session, learner_id=learner_id,
                             question_id=target.question.id, is_staff=is_author, now=now,
                             variant=target.variant if target.has_variables else None)


def start_run(
    *, db_session: Session, target: Runnable, params: dict[str, Any], learner_id: str,
    client_ip: str, limit_per_minute: int, now: datetime, is_author: bool = False,
) -> tuple[Run, bool]:
    """The run answering these knobs of the target's variant: cached, shared, or newly queued.

    Raises knobs.InvalidKnob, AnswerFirst (409) before the learner answered this variant (or
    while the question is in their live mock interview: the one rule, app.reveal), or
    RateLimited when a new run would exceed the learner's (or the address's) limit.
    """
    torch_v, harness_v = service.engine_versions()
    req = service.request_for(target.doc, params, torch_version=torch_v, harness_version=harness_v,
                              revision_id=target.revision.id, requested_by=f"learner:{learner_id}",
                              requested_ip=client_ip)
    if not _may_measure(db_session, target, learner_id, now, is_author):
        raise AnswerFirst("Answer this question first (predict, then run): its run is shown "
                          "once you have answered these numbers.")

    def charge() -> None:
        # Only a run that will execute counts: cached runs stay free. Learner code
        # (exercises) has its own budget (app.exercises.service).
        message = (f"Too many new runs in the last minute (limit {limit_per_minute} per learner); "
                   "runs that are already cached stay free.")
        ratelimit.hit(db_session=db_session, bucket="verify", key=learner_id,
                      limit=limit_per_minute, window_s=RATE_WINDOW_SECONDS, message=message)
        ratelimit.hit(db_session=db_session, bucket="verify-ip", key=client_ip,
                      limit=limit_per_minute * IP_RATE_FACTOR, window_s=RATE_WINDOW_SECONDS,
                      message=message)

    return service.request_run(db_session=db_session, req=req, before_new=charge)


def guard_script(*, db_session: Session, target: Runnable, learner_id: str, now: datetime,
                 is_author: bool = False) -> None:
    """The torchrun script of a question's snippet is a measurement the learner makes at home:
    it is theirs by the one rule, once they answered that variant and not while the question is
    in their live mock interview (AnswerFirst). An exercise's snippet is its starter, which its
    page shows anyway."""
    if not target.doc.is_exercise and not _may_measure(db_session, target, learner_id, now,
                                                       is_author):
        raise AnswerFirst("Answer this question first: its snippet, to run at home, is yours "
                          "once you have answered these numbers.")


def visible_run(*, db_session: Session, run_id: int, learner_id: str, is_author: bool,
                now: datetime) -> Run:
    """The run if this visitor may see it, else NotFound (the same answer as for no run, so
    enumerating ids tells nothing).

    Authors and admins see every run. A learner's own exercise code is that learner's
    alone. Every other run of an exercise (its reference solution, its starter, its
    known-wrong solutions, all with the checks appended) is for authors only: its text is
    the exercise's answer. A published question's run is visible to everyone who may see
    the question.
    """
    run = service.get_run(db_session=db_session, run_id=run_id)
    if run is None:
        raise NotFound(f"No run {run_id}.")
    if is_author:
        return run
    if run.priority == PRIORITY_PRIVATE:
        if run.requested_by == f"learner:{learner_id}":
            return run
        raise NotFound(f"No run {run_id}.")
    revision = (db_session.get(QuestionRevision, run.question_revision_id)
                if run.question_revision_id else None)
    # An exercise's own runs (reference, starter, wrong solutions) are its authors': the
    # reference's values are what `reference: true` checks compare with.
    if revision is None or revision_doc(revision).is_exercise:
        raise NotFound(f"No run {run_id}.")
    question = db_session.get(Question, revision.question_id)
    if question is None or question.status != STATUS_PUBLISHED:
        raise NotFound(f"No run {run_id}.")
    if not (question.current_revision_id == revision.id
            or practice.is_pinned(db_session=db_session, learner_id=learner_id,
                                  revision_id=revision.id)
            or _runs_current_snippet(question, run)):
        raise NotFound(f"No run {run_id}.")
    # The one rule (app.reveal): a measurement reaches a learner once they answered
    # the question (the variant the run measured), never while it is in their live mock.
    template = revision_doc(question.current_revision or revision)
    measured = variant_of_run(template, dict(run.params or {}))
    if not reveal.may_reveal(db_session=db_session, learner_id=learner_id,
                             question_id=question.id, now=now,
                             variant=measured if template.variables else None):
        raise NotFound(f"No run {run_id}.")
    return run


def _visible_or_none(db_session: Session, run_id: int, learner_id: str, is_author: bool,
                     now: datetime) -> Run | None:
    try:
        return visible_run(db_session=db_session, run_id=run_id, learner_id=learner_id,
                           is_author=is_author, now=now)
    except NotFound:
        return None


def shown_result(*, db_session: Session, run: Run, is_author: bool) -> RunResult | None:
    """A run's result as this visitor may read it: a learner's own exercise run without what
    its hidden checks measured (results.learner_view); every other run as stored."""
    result = results.result_of(run)
    if result is None or is_author or run.priority != PRIORITY_PRIVATE:
        return result
    revision = (db_session.get(QuestionRevision, run.question_revision_id)
                if run.question_revision_id else None)
    return results.learner_view(result, revision_doc(revision) if revision is not None else None)


def shown_snippet(run: Run, *, is_author: bool) -> str:
    """The code a run's page prints: a learner sees only their own code, never the checks
    appended to it (authors see everything that ran)."""
    if run.priority == PRIORITY_PRIVATE and not is_author:
        return run.snippet_text.rsplit(results.HARNESS_MARK, 1)[0]
    return run.snippet_text


def _runs_current_snippet(question: Question, run: Run) -> bool:
    """A run made for an older revision whose snippet the current one kept: the cache hands it
    to today's learners (start_run), so they may read it."""
    current = question.current_revision
    return current is not None and revision_doc(current).snippet_text == run.snippet_text


@dataclass
class RunPanel:
    """What the Verify panel shows for one run to one learner."""

    run: Run
    result: RunResult | None
    slug: str | None
    question: Question | None = None
    # The revision the learner is looking at, and its document: its key and expectations are
    # the ones shown, whichever revision the (cached) run was first made for.
    revision: QuestionRevision | None = None
    doc: QuestionDoc | None = None
    # The revision the run was made for, when it is another one.
    run_revision: QuestionRevision | None = None
    # The variant of the viewed revision the run measured (its values are in the run's params).
    variant: int | None = None
    # False when the run executed another snippet than this revision's: its measurement says
    # nothing about this revision's expectations.
    same_snippet: bool = True
    # The answer key and the checks against it, once this learner has answered.
    reveal: bool = False
    checks: list[CheckResult] | None = None
    choices: list[ChoiceEvidence] | None = None
    prev: Run | None = None
    changes: list[Change] | None = None

    def context(self) -> dict[str, Any]:
        # panel_result: the result as this visitor may read it (verify/_run.html).
        return {"run": self.run, "panel_result": self.result, "slug": self.slug,
                "question": self.question, "doc": self.doc,
                "revision": self.revision, "run_revision": self.run_revision,
                "rev_id": self.revision.id if self.revision is not None else None,
                "same_snippet": self.same_snippet, "reveal": self.reveal, "checks": self.checks,
                "run_variant": self.variant,
                "choice_evidence": self.choices or [], "prev": self.prev,
                "changes": self.changes or []}


def viewed_revision(
    *, db_session: Session, question: Question, revision_id: int | None, learner_id: str,
) -> QuestionRevision:
    """The revision a learner is looking at: a pinned one they may see, else the current one."""
    try:
        return pick_revision(db_session=db_session, question=question, revision_id=revision_id,
                             learner_id=learner_id)
    except NotFound:
        assert question.current_revision is not None
        return question.current_revision


def variant_of_run(doc: QuestionDoc, params: dict[str, Any], hint: int | None = None) -> int | None:
    """Which variant of a (template) question a run with these params measured: the one whose
    variables' values it ran with (`hint` first, when it matches); None when none does."""
    if not doc.variables:
        return 0
    matching = [i for i in range(doc.variant_count)
                if all(k in params and same_value(params[k], v)
                       for k, v in doc.variant_params(i).items())]
    if hint in matching:
        return hint
    return matching[0] if matching else None


def run_panel(
    *, db_session: Session, run: Run, learner_id: str, slug: str | None, prev_id: int | None,
    now: datetime, revision_id: int | None = None, variant: int | None = None,
    is_author: bool = False,
) -> RunPanel:
    """The panel of a run: its result, and (once this variant is answered) the checks against
    the key of the revision the learner is looking at (`revision_id`, else the question's
    current one), in the variant the run measured.

    Runs are cached by snippet, knobs and the variant's values, so a run may have been made
    for an older revision with the same snippet; expectations are declarative, so it is
    re-checked against this revision's without running again.
    """
    panel = RunPanel(run, shown_result(db_session=db_session, run=run, is_author=is_author), slug)
    run_revision = (db_session.get(QuestionRevision, run.question_revision_id)
                    if run.question_revision_id else None)
    question = (db_session.get(Question, run_revision.question_id)
                if run_revision is not None else None)
    if (question is not None and question.status == STATUS_PUBLISHED
            and question.current_revision is not None):
        revision = viewed_revision(db_session=db_session, question=question,
                                   revision_id=revision_id, learner_id=learner_id)
        template = revision_doc(revision)
        found = variant_of_run(template, dict(run.params or {}), variant)
        doc = revision_variant(revision=revision, variant=found if found is not None else 0)
        panel.question, panel.revision, panel.doc, panel.slug = (
            question, revision, doc, question.slug)
        panel.variant = found
        if run_revision is not None and run_revision.id != revision.id:
            panel.run_revision = run_revision
        # A run of values no variant of this revision has measured something else.
        panel.same_snippet = run.snippet_text == doc.snippet_text and found is not None
        # An exercise's checks (some hidden) are shown only by app.exercises.service. With
        # variants, a key is shown only for a variant this learner has answered.
        answered = (found is not None or not template.variables) and reveal.may_reveal(
            db_session=db_session, learner_id=learner_id, question_id=question.id,
            variant=found if template.variables else None, is_staff=is_author, now=now)
        panel.reveal = not doc.is_exercise and answered
        if (panel.reveal and panel.result is not None and doc.verify is not None
                and panel.same_snippet):
            params = dict(run.params or {})
            panel.checks = evaluate(doc.verify.expect, panel.result, params, run.world_size,
                                    trace=doc.trace)
            panel.choices = choice_evidence(doc, panel.result, params, run.world_size)
    if prev_id and prev_id != run.id:
        # The run compared with is one this visitor may see too (the one rule): a comparison
        # is no way to read another learner's run or another variant's measurement.
        prev = _visible_or_none(db_session, prev_id, learner_id, is_author, now)
        before = (shown_result(db_session=db_session, run=prev, is_author=is_author)
                  if prev is not None else None)
        if (prev is not None and before is not None and panel.result is not None
                and prev.snippet_text == run.snippet_text):
            panel.prev, panel.changes = prev, compare(before, panel.result)
    return panel


def comparable_previous(*, db_session: Session, run: Run, prev_id: int | None, learner_id: str,
                        now: datetime, is_author: bool = False) -> Run | None:
    """The earlier finished run of the same snippet to show beside this one, if any, and if
    this visitor may see it.

    The same snippet, not the same revision: the cache may answer one knob combination with
    a run made for an earlier revision that had this snippet.
    """
    if not prev_id or prev_id == run.id:
        return None
    prev = _visible_or_none(db_session, prev_id, learner_id, is_author, now)
    if (prev is None or prev.status != RUN_DONE or prev.snippet_text != run.snippet_text):
        return None
    return prev
