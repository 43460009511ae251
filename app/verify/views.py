"""Verify over HTTP: start (or reuse) a run for a question's knobs, and read a run.

Thin: access rules, rate limits and what a panel shows are app.verify.access; the
domain errors they raise become 404, 422 and 429 in app.main.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, BackgroundTasks, HTTPException, Path, Query, Request
from fastapi.responses import PlainTextResponse, RedirectResponse, Response

from app.deps import (
    API_BUSY,
    API_ERROR,
    CSRF,
    CommittingRoute,
    CurrentLearner,
    FormDep,
    OptionalUser,
    SessionDep,
    SettingsDep,
    client_ip,
    is_htmx,
    notify_workers,
)
from app.errors import InvalidInput, RateLimited, TooLarge
from app.questions.service import get_published, revision_doc
from app.templating import templates
from app.verify import access, exercise, knobs
from app.verify.models import RUN_DONE, RUN_FAILED, Run
from app.verify.schemas import (
    ExerciseRunIn,
    ExerciseRunOut,
    RunOut,
    SubmissionOut,
    VerifyIn,
    VerifyOut,
)
from app.verify.torchrun import torchrun_script

api = APIRouter(prefix="/api/v1", tags=["verify"], responses=API_BUSY, route_class=CommittingRoute)

# Database ids are 32-bit on PostgreSQL; a larger number is no run at all.
MAX_ID = 2**31 - 1
RunId = Annotated[int, Path(ge=1, le=MAX_ID)]


def _small_int(raw: object) -> int | None:
    return int(raw) if isinstance(raw, str) and raw.isdigit() and len(raw) < 10 else None


def _start(
    request: Request, background: BackgroundTasks, db_session: SessionDep, settings: SettingsDep,
    learner_id: str, slug: str, params: dict[str, Any], revision_id: int | None = None,
) -> tuple[Run, bool]:
    run, cached = access.start_run(
        db_session=db_session, slug=slug, params=params, learner_id=learner_id,
        client_ip=client_ip(request), limit_per_minute=settings.verify_rate_per_minute,
        revision_id=revision_id)
    if run.status != RUN_DONE:
        background.add_task(notify_workers, request)
    return run, cached


@api.post("/questions/{slug}/verify", response_model=VerifyOut,
          responses={404: {"description": "No such published question, or it has no snippet.",
                         **API_ERROR}, 422: {}, 429: {"description": "Too many new runs.", **API_ERROR}})
def verify_question(
    slug: str, body: VerifyIn, request: Request, background: BackgroundTasks,
    db_session: SessionDep, settings: SettingsDep, learner_id: CurrentLearner,
) -> VerifyOut:
    """Run the question's snippet with these knob values, or return the cached run."""
    run, cached = _start(request, background, db_session, settings, learner_id, slug, body.params)
    return VerifyOut(run_id=run.id, status=run.status, cached=cached,
                     url=f"/api/v1/runs/{run.id}")


def run_out(run: Run) -> RunOut:
    return RunOut(
        run_id=run.id, status=run.status, world_size=run.world_size,
        params=dict(run.params or {}), torch_version=run.torch_version,
        requested_at=run.requested_at, claimed_at=run.claimed_at, started_at=run.started_at,
        finished_at=run.finished_at, attempts=run.attempts,
        failure_reason=run.failure_reason if run.status == RUN_FAILED else None,
        result=run.result if run.status == RUN_DONE else None,
    )


@api.get("/runs/{run_id}", response_model=RunOut,
         responses={404: {"description": "No run that this visitor may see.", **API_ERROR}})
def get_run(run_id: RunId, db_session: SessionDep, learner_id: CurrentLearner,
            user: OptionalUser) -> RunOut:
    """A run's status and, once done, its measured result."""
    return run_out(access.visible_run(db_session=db_session, run_id=run_id, learner_id=learner_id,
                                      is_author=user is not None and user.is_staff))


# ---- Browser pages: the Verify panel, its polling fragment, and the torchrun script ----

router = APIRouter(include_in_schema=False, route_class=CommittingRoute)


@router.post("/questions/{slug}/verify")
def verify_form(
    slug: str, request: Request, form: FormDep, background: BackgroundTasks, db_session: SessionDep,
    settings: SettingsDep, learner_id: CurrentLearner, _: CSRF,
) -> Response:
    prev_id, rev_id = _small_int(form.get("prev")), _small_int(form.get("rev"))
    _revision, doc = access.runnable_doc(db_session=db_session, slug=slug, revision_id=rev_id,
                                         learner_id=learner_id)
    assert doc.verify is not None
    try:
        run, cached = _start(request, background, db_session, settings, learner_id, slug,
                             knobs.from_form(doc.verify, form), rev_id)
    except (knobs.InvalidKnob, RateLimited) as exc:
        if not is_htmx(request):
            raise
        status = 429 if isinstance(exc, RateLimited) else 422
        return templates.TemplateResponse(request, "verify/_error.html", {"message": str(exc)},
                                          status_code=status)
    if not is_htmx(request):
        target = (f"/runs/{run.id}?slug={slug}" + (f"&prev={prev_id}" if prev_id else "")
                  + (f"&rev={rev_id}" if rev_id else ""))
        return RedirectResponse(target, status_code=303)
    ctx = access.run_panel(db_session=db_session, run=run, learner_id=learner_id, slug=slug,
                           prev_id=prev_id, revision_id=rev_id).context()
    ctx.update(cached=cached, prev_id=prev_id)
    prev_run = access.comparable_previous(db_session=db_session, run=run, prev_id=prev_id)
    if prev_run is not None:
        prev = access.run_panel(db_session=db_session, run=prev_run, learner_id=learner_id,
                                slug=slug, prev_id=None, revision_id=rev_id)
        ctx.update(prev_run=prev_run, prev_checks=prev.checks,
                   prev_choice_evidence=prev.choices or [])
        return templates.TemplateResponse(request, "verify/_pair.html", ctx)
    return templates.TemplateResponse(request, "verify/_run.html", ctx)


@router.get("/runs/{run_id}")
def run_page(
    run_id: RunId, request: Request, db_session: SessionDep, learner_id: CurrentLearner,
    user: OptionalUser, slug: str | None = None,
    prev: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    rev: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
) -> Response:
    """A run as a page, or (for htmx polling) as the fragment that replaces itself."""
    is_author = user is not None and user.is_staff
    run = access.visible_run(db_session=db_session, run_id=run_id, learner_id=learner_id,
                             is_author=is_author)
    template = "verify/_run.html" if is_htmx(request) else "verify/run_page.html"
    panel = access.run_panel(db_session=db_session, run=run, learner_id=learner_id, slug=slug,
                             prev_id=prev, revision_id=rev)
    return templates.TemplateResponse(request, template, {
        **panel.context(), "prev_id": prev,
        "shown_snippet": access.shown_snippet(run, is_author=is_author)})


@router.get("/questions/{slug}/torchrun.py")
def torchrun_download(slug: str, request: Request, db_session: SessionDep) -> Response:
    question = get_published(db_session=db_session, slug=slug)
    if question is None or question.current_revision is None:
        raise HTTPException(404, f"No question called {slug!r}.")
    doc = revision_doc(question.current_revision)
    if doc.verify is None or doc.snippet_text is None:
        raise HTTPException(404, "This question has no snippet to run.")
    world_size, params = knobs.resolve(doc.verify, knobs.from_form(doc.verify, request.query_params))
    script = torchrun_script(slug=slug, title=doc.title, snippet=doc.snippet_text,
                             world_size=world_size, params=params,
                             timeout_s=doc.verify.timeout_s)
    return PlainTextResponse(script, media_type="text/x-python", headers={
        "Content-Disposition": f'attachment; filename="{slug}.py"'})


# ---- Exercises: the learner's own code against the exercise's checks ----

def _submit(request: Request, background: BackgroundTasks, db_session: SessionDep,
            settings: SettingsDep, learner_id: str, slug: str, code: str) -> list[Run]:
    runs = exercise.submit(db_session=db_session, slug=slug, code=code, learner_id=learner_id,
                           client_ip=client_ip(request),
                           limit_per_minute=settings.exercise_rate_per_minute)
    if any(r.status != RUN_DONE for r in runs):
        background.add_task(notify_workers, request)
    return runs


def _submission_out(sub: exercise.Submission) -> SubmissionOut:
    return SubmissionOut.model_validate({
        "submission": sub.token, "status": "done" if sub.done else "pending", "passed": sub.passed,
        "infrastructure_failed": sub.infrastructure_failed,
        "visible": [c.to_json() for c in sub.visible], "hidden_total": sub.hidden_total,
        "hidden_passed": sub.hidden_passed, "run_ids": [r.id for r in sub.runs],
        "attempt_id": sub.attempt_id})


@api.post("/exercises/{slug}/run", response_model=ExerciseRunOut,
          responses={404: {}, 413: {}, 429: {}})
def run_exercise_api(
    slug: str, body: ExerciseRunIn, request: Request, background: BackgroundTasks,
    db_session: SessionDep, settings: SettingsDep, learner_id: CurrentLearner,
) -> ExerciseRunOut:
    """Run your code against the exercise's checks (one run per audited knob combination)."""
    runs = _submit(request, background, db_session, settings, learner_id, slug, body.code)
    token = "-".join(str(r.id) for r in runs)
    done = all(r.status in (RUN_DONE, RUN_FAILED) for r in runs)
    return ExerciseRunOut(submission=token, run_ids=[r.id for r in runs],
                          status="done" if done else "pending",
                          url=f"/api/v1/exercises/{slug}/submissions/{token}")


@api.get("/exercises/{slug}/submissions/{token}", response_model=SubmissionOut,
         responses={404: {}})
def exercise_submission_api(slug: str, token: str, db_session: SessionDep,
                            learner_id: CurrentLearner) -> SubmissionOut:
    """Your Run's checks: each visible one with what was measured; hidden ones as counts."""
    return _submission_out(exercise.submission(db_session=db_session, slug=slug, token=token,
                                               learner_id=learner_id))


def _exercise_ctx(db_session: SessionDep, slug: str) -> dict[str, Any]:
    question, _revision, doc = exercise.exercise_doc(db_session=db_session, slug=slug)
    assert doc.verify is not None and doc.exercise is not None
    visible = [e.label for e in doc.verify.expect if not e.hidden]
    return {"question": question, "doc": doc, "slug": slug, "starter": doc.snippet_text or "",
            "hints": doc.exercise.hints, "visible_labels": visible,
            "hidden_count": sum(1 for e in doc.verify.expect if e.hidden),
            "combos": doc.verify.audit_combinations(), "max_code_bytes": exercise.MAX_CODE_BYTES}


@router.get("/exercises/{slug}")
def exercise_page(slug: str, request: Request, db_session: SessionDep) -> Response:
    ctx = _exercise_ctx(db_session, slug)
    return templates.TemplateResponse(request, "verify/exercise.html", {**ctx, "code": ctx["starter"]})


@router.post("/exercises/{slug}/run")
def exercise_run_form(
    slug: str, request: Request, form: FormDep, background: BackgroundTasks, db_session: SessionDep,
    settings: SettingsDep, learner_id: CurrentLearner, _: CSRF,
) -> Response:
    code = form.get("code")
    code = code if isinstance(code, str) else ""
    try:
        runs = _submit(request, background, db_session, settings, learner_id, slug, code)
    except (RateLimited, TooLarge, InvalidInput) as exc:
        if not is_htmx(request):
            raise
        status = {RateLimited: 429, TooLarge: 413}.get(type(exc), 422)
        return templates.TemplateResponse(request, "verify/_error.html", {"message": str(exc)},
                                          status_code=status)
    token = "-".join(str(r.id) for r in runs)
    if not is_htmx(request):
        return RedirectResponse(f"/exercises/{slug}/submissions/{token}", status_code=303)
    return _submission_fragment(request, db_session, slug, token, learner_id)


def _submission_fragment(request: Request, db_session: SessionDep, slug: str, token: str,
                         learner_id: str) -> Response:
    sub = exercise.submission(db_session=db_session, slug=slug, token=token, learner_id=learner_id)
    return templates.TemplateResponse(request, "verify/_exercise_result.html",
                                      {"sub": sub, "slug": slug, "run": sub.shown_run})


@router.get("/exercises/{slug}/submissions/{token}")
def exercise_submission_page(slug: str, token: str, request: Request, db_session: SessionDep,
                             learner_id: CurrentLearner) -> Response:
    """A Run's result: the fragment htmx polls, or (without JavaScript) the whole page."""
    if is_htmx(request):
        return _submission_fragment(request, db_session, slug, token, learner_id)
    sub = exercise.submission(db_session=db_session, slug=slug, token=token, learner_id=learner_id)
    ctx = _exercise_ctx(db_session, slug)
    return templates.TemplateResponse(request, "verify/exercise.html", {
        **ctx, "code": sub.code, "sub": sub, "run": sub.shown_run})
