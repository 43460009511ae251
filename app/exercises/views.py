"""Exercise pages: the starter (or the learner's saved solution) in an editor, Run, and the
result of the learner's own code against the checks (visible ones described, hidden ones
counted), led by one headline: passed, n checks fail, or the run hung or raised."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, BackgroundTasks, Request
from fastapi.responses import RedirectResponse, Response

from app.deps import (
    CSRF,
    CurrentLearner,
    FormDep,
    SessionDep,
    SettingsDep,
    WriteSessionDep,
    client_ip,
    is_htmx,
    notify_workers,
)
from app.errors import DomainError
from app.exercises import service as exercise
from app.templating import templates
from app.verify.engine.forbid import CHECKS_FILE
from app.verify.models import RUN_DONE
from app.verify.results import result_of
from app.verify.service import PrivateCaps

router = APIRouter(include_in_schema=False)


@dataclass
class Headline:
    """The one sentence a finished Run leads with."""

    kind: str  # "passed", "hung", "raised", "failing" or "broken" (our infrastructure)
    text: str
    # The learner's code has this many lines; a cited line past it is in the checks.
    code_lines: int
    cites_checks: bool = False


def _where(line: int | None, code_lines: int) -> tuple[str, bool]:
    if not line:
        return "", False
    if line <= code_lines:
        return f" at line {line} of your code", False
    return " in the exercise's checks, after your code", True


def headline(sub: exercise.Submission) -> Headline:
    """What one finished Run of an exercise amounts to, in one sentence."""
    n = len(sub.code.splitlines())
    if sub.infrastructure_failed:
        return Headline("broken", "The verify service could not run your code on every setting; "
                                  "this is our fault, not your code's. Run it again in a moment.", n)
    if sub.passed:
        return Headline("passed", "Passed: every check passes" +
                        (", hidden ones too." if sub.hidden_total else "."), n)
    results = [r for r in (result_of(run) for run in sub.runs) if r is not None]
    for res in results:
        if res.outcome == "timeout":
            blocked = next((r for r in res.ranks if r.blocked_in is not None), None)
            if blocked is not None and blocked.blocked_in is not None:
                where, past = _where(blocked.blocked_in.line, n)
                return Headline("hung", f"Your code hung: rank {blocked.rank} was still waiting in "
                                        f"{blocked.blocked_in.op}{where} when the run was stopped.",
                                n, past)
            return Headline("hung", "Your code hung: the run was stopped at its time limit.", n)
    for res in results:
        if res.outcome == "error":
            failed = next((r for r in res.ranks if r.error is not None), None)
            if failed is not None and failed.error is not None:
                where, past = _where(failed.error.line, n)
                if not where and f'File "{CHECKS_FILE}"' in failed.error.traceback:
                    # Raised in the checks, which call the learner's code after it ran.
                    where, past = " in the exercise's checks, after your code", True
                return Headline("raised", f"Your code raised {failed.error.type} on rank "
                                          f"{failed.rank}{where}.", n, past)
    visible = sum(1 for c in sub.visible if not c.passed)
    hidden = sub.hidden_total - sub.hidden_passed
    total = visible + hidden
    parts = ([f"{visible} you can see below"] if visible else []) + \
        ([f"{hidden} hidden"] if hidden else [])
    return Headline("failing", f"{total} check{'' if total == 1 else 's'} fail"
                    f"{'s' if total == 1 else ''}: {' and '.join(parts)}.", n)


def _exercise_ctx(db_session: SessionDep, slug: str, learner_id: str) -> dict[str, Any]:
    question, _revision, doc = exercise.exercise_doc(db_session=db_session, slug=slug)
    assert doc.verify is not None and doc.exercise is not None
    visible = [e.label for e in doc.verify.expect if not e.hidden]
    return {"question": question, "doc": doc, "slug": slug, "starter": doc.snippet_text or "",
            "hints": doc.exercise.hints, "visible_labels": visible,
            "hidden_count": sum(1 for e in doc.verify.expect if e.hidden),
            "combos": doc.verify.audit_combinations(), "max_code_bytes": exercise.MAX_CODE_BYTES,
            "solved": exercise.solved(db_session=db_session, learner_id=learner_id,
                                     question_id=question.id),
            "progress": exercise.progress(db_session=db_session, learner_id=learner_id,
                                          question_id=question.id)}


@router.get("/exercises/{slug}")
def exercise_page(slug: str, request: Request, db_session: SessionDep,
                  learner_id: CurrentLearner, starter: str = "") -> Response:
    ctx = _exercise_ctx(db_session, slug, learner_id)
    # A solved exercise opens on the learner's own passing code; ?starter=1 (Reset without
    # JavaScript) gives the starter.
    saved = ctx["solved"].code if ctx["solved"] and not starter else ""
    code = saved or ctx["starter"]
    return templates.TemplateResponse(request, "exercises/exercise.html", {**ctx, "code": code})


@router.post("/exercises/{slug}/run")
def exercise_run_form(
    slug: str, request: Request, form: FormDep, background: BackgroundTasks, db_session: SessionDep,
    settings: SettingsDep, learner_id: CurrentLearner, _: CSRF,
) -> Response:
    code = form.get("code")
    code = code if isinstance(code, str) else ""
    try:
        runs = exercise.submit(db_session=db_session, slug=slug, code=code, learner_id=learner_id,
                               client_ip=client_ip(request),
                               limit_per_minute=settings.exercise_rate_per_minute,
                               caps=PrivateCaps.from_settings(settings))
    except DomainError as exc:
        if not is_htmx(request):
            raise
        return templates.TemplateResponse(request, "verify/_error.html", {"message": str(exc)},
                                          status_code=exc.status, headers=exc.headers)
    if any(r.status != RUN_DONE for r in runs):
        background.add_task(notify_workers, request)  # after the commit
    token = "-".join(str(r.id) for r in runs)
    if not is_htmx(request):
        return RedirectResponse(f"/exercises/{slug}/submissions/{token}", status_code=303)
    return _submission_fragment(request, db_session, slug, token, learner_id)


def _result_ctx(db_session: SessionDep, slug: str, sub: exercise.Submission) -> dict[str, Any]:
    ctx: dict[str, Any] = {"sub": sub, "slug": slug, "run": sub.shown_run}
    if sub.done:
        ctx["headline"] = headline(sub)
        if sub.passed:
            ctx["next_exercise"] = exercise.next_exercise(db_session=db_session, slug=slug)
    return ctx


def _submission_fragment(request: Request, db_session: SessionDep, slug: str, token: str,
                         learner_id: str) -> Response:
    sub = exercise.submission(db_session=db_session, slug=slug, token=token, learner_id=learner_id)
    return templates.TemplateResponse(request, "exercises/_exercise_result.html",
                                      _result_ctx(db_session, slug, sub))


@router.get("/exercises/{slug}/submissions/{token}")
def exercise_submission_page(slug: str, token: str, request: Request, db_session: WriteSessionDep,
                             learner_id: CurrentLearner) -> Response:
    """A Run's result: the fragment htmx polls, or (without JavaScript) the whole page."""
    if is_htmx(request):
        return _submission_fragment(request, db_session, slug, token, learner_id)
    sub = exercise.submission(db_session=db_session, slug=slug, token=token, learner_id=learner_id)
    ctx = _exercise_ctx(db_session, slug, learner_id)
    return templates.TemplateResponse(request, "exercises/exercise.html", {
        **ctx, "code": sub.code, **_result_ctx(db_session, slug, sub)})


@router.get("/exercises/{slug}/solution")
def exercise_solution_page(slug: str, request: Request, db_session: WriteSessionDep,
                           learner_id: CurrentLearner) -> Response:
    """The reference solution beside the learner's newest code, and the diff between them:
    once solved, given up, or after three failed Runs (403, saying how many to go, before)."""
    question, _revision, doc = exercise.exercise_doc(db_session=db_session, slug=slug)
    found = exercise.solution(db_session=db_session, slug=slug, learner_id=learner_id)
    return templates.TemplateResponse(request, "exercises/solution.html", {
        "doc": doc, "slug": slug, "question": question, "solution": found,
        "progress": exercise.progress(db_session=db_session, learner_id=learner_id,
                                      question_id=question.id)})


@router.post("/exercises/{slug}/give-up")
def exercise_give_up_form(slug: str, form: FormDep, db_session: SessionDep,
                          learner_id: CurrentLearner, _: CSRF) -> Response:
    """"I give up": a failed attempt (review brings the exercise back soon); then the solution."""
    code = form.get("code")
    exercise.give_up(db_session=db_session, slug=slug, learner_id=learner_id,
                     code=code if isinstance(code, str) else "")
    return RedirectResponse(f"/exercises/{slug}/solution", status_code=303)
