"""Verify over HTTP: start (or reuse) a run for a question's knobs, and read a run.

Thin: access rules, rate limits and what a panel shows are app.verify.access; the
domain errors they raise become 404, 422 and 429 in app.main.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, BackgroundTasks, Path, Query, Request
from fastapi.responses import PlainTextResponse, RedirectResponse, Response

from app.deps import (
    API_BUSY,
    API_ERROR,
    CSRF,
    ClockDep,
    CurrentLearner,
    FormDep,
    OptionalUser,
    SessionDep,
    SettingsDep,
    client_ip,
    is_htmx,
    notify_workers,
)
from app.errors import DomainError
from app.questions.values import describe_variant
from app.templating import templates
from app.verify import access, knobs
from app.verify.engine.result import RunResult
from app.verify.models import RUN_DONE, RUN_FAILED, Run
from app.verify.schemas import RunOut, VerifyIn, VerifyOut
from app.verify.torchrun import torchrun_script

api = APIRouter(prefix="/api/v1", tags=["verify"], responses=API_BUSY)

# Database ids are 32-bit on PostgreSQL; a larger number is no run at all.
MAX_ID = 2**31 - 1
RunId = Annotated[int, Path(ge=1, le=MAX_ID)]


def _small_int(raw: object) -> int | None:
    return int(raw) if isinstance(raw, str) and raw.isdigit() and len(raw) < 10 else None


def _start(
    request: Request, background: BackgroundTasks, db_session: SessionDep, settings: SettingsDep,
    learner_id: str, target: access.Runnable, params: dict[str, Any], now: datetime,
    is_author: bool,
) -> tuple[Run, bool]:
    run, cached = access.start_run(
        db_session=db_session, target=target, params=params, learner_id=learner_id,
        client_ip=client_ip(request), limit_per_minute=settings.verify_rate_per_minute,
        now=now, is_author=is_author)
    if run.status != RUN_DONE:
        background.add_task(notify_workers, request)
    return run, cached


@api.post("/questions/{slug}/verify", response_model=VerifyOut,
          responses={404: {"description": "No such published question, or it has no snippet.",
                         **API_ERROR}, 422: {}, 429: {"description": "Too many new runs.", **API_ERROR}})
def verify_question(
    slug: str, body: VerifyIn, request: Request, background: BackgroundTasks,
    db_session: SessionDep, settings: SettingsDep, learner_id: CurrentLearner, user: OptionalUser,
    clock: ClockDep,
) -> VerifyOut:
    """Run the question's snippet with these knob values on one variant, or return the cached
    run."""
    target = access.runnable(db_session=db_session, slug=slug, revision_id=None,
                             learner_id=learner_id, variant=body.variant)
    run, cached = _start(request, background, db_session, settings, learner_id, target,
                         body.params, clock.now(), user is not None and user.is_staff)
    return VerifyOut(run_id=run.id, status=run.status, cached=cached,
                     url=f"/api/v1/runs/{run.id}", variant=target.variant)


def run_out(run: Run, result: RunResult | None = None) -> RunOut:
    """A run for the API; `result` replaces the stored one (a learner's view of their own
    exercise run: access.shown_result)."""
    return RunOut(
        run_id=run.id, status=run.status, world_size=run.world_size,
        params=dict(run.params or {}), torch_version=run.torch_version,
        requested_at=run.requested_at, claimed_at=run.claimed_at, started_at=run.started_at,
        finished_at=run.finished_at, attempts=run.attempts,
        failure_reason=run.failure_reason if run.status == RUN_FAILED else None,
        result=(None if run.status != RUN_DONE
                else result.model_dump(mode="json") if result is not None else run.result),
    )


@api.get("/runs/{run_id}", response_model=RunOut,
         responses={404: {"description": "No run that this visitor may see.", **API_ERROR}})
def get_run(run_id: RunId, db_session: SessionDep, learner_id: CurrentLearner,
            user: OptionalUser, clock: ClockDep) -> RunOut:
    """A run's status and, once done, its measured result."""
    is_author = user is not None and user.is_staff
    run = access.visible_run(db_session=db_session, run_id=run_id, learner_id=learner_id,
                             is_author=is_author, now=clock.now())
    return run_out(run, access.shown_result(db_session=db_session, run=run, is_author=is_author))


# ---- Browser pages: the Verify panel, its polling fragment, and the torchrun script ----

router = APIRouter(include_in_schema=False)


@router.post("/questions/{slug}/verify")
def verify_form(
    slug: str, request: Request, form: FormDep, background: BackgroundTasks, db_session: SessionDep,
    settings: SettingsDep, learner_id: CurrentLearner, user: OptionalUser, clock: ClockDep,
    _: CSRF,
) -> Response:
    now = clock.now()
    is_author = user is not None and user.is_staff
    prev_id, rev_id = _small_int(form.get("prev")), _small_int(form.get("rev"))
    variant = _small_int(form.get("variant"))
    target = access.runnable(db_session=db_session, slug=slug, revision_id=rev_id,
                             learner_id=learner_id, variant=variant)
    assert target.doc.verify is not None
    try:
        run, cached = _start(request, background, db_session, settings, learner_id, target,
                             knobs.from_form(target.doc.verify, form), now, is_author)
    except DomainError as exc:
        if not is_htmx(request):
            raise
        return templates.TemplateResponse(request, "verify/_error.html", {"message": str(exc)},
                                          status_code=exc.status, headers=exc.headers)
    if not is_htmx(request):
        url = (f"/runs/{run.id}?slug={slug}" + (f"&prev={prev_id}" if prev_id else "")
               + (f"&rev={rev_id}" if rev_id else "")
               + (f"&variant={variant}" if variant is not None else ""))
        return RedirectResponse(url, status_code=303)
    ctx = access.run_panel(db_session=db_session, run=run, learner_id=learner_id, slug=slug,
                           prev_id=prev_id, now=now, revision_id=rev_id, variant=variant,
                           is_author=is_author).context()
    ctx.update(cached=cached, prev_id=prev_id)
    prev_run = access.comparable_previous(db_session=db_session, run=run, prev_id=prev_id,
                                          learner_id=learner_id, now=now, is_author=is_author)
    if prev_run is not None:
        prev = access.run_panel(db_session=db_session, run=prev_run, learner_id=learner_id,
                                slug=slug, prev_id=None, now=now, revision_id=rev_id,
                                variant=variant, is_author=is_author)
        ctx.update(prev_run=prev_run, prev_result=prev.result, prev_checks=prev.checks,
                   prev_choice_evidence=prev.choices or [])
        return templates.TemplateResponse(request, "verify/_pair.html", ctx)
    return templates.TemplateResponse(request, "verify/_run.html", ctx)


@router.get("/runs/{run_id}")
def run_page(
    run_id: RunId, request: Request, db_session: SessionDep, learner_id: CurrentLearner,
    user: OptionalUser, clock: ClockDep, slug: str | None = None,
    prev: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    rev: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    variant: Annotated[int | None, Query(ge=0, le=1000)] = None,
) -> Response:
    """A run as a page, or (for htmx polling) as the fragment that replaces itself."""
    is_author = user is not None and user.is_staff
    now = clock.now()
    run = access.visible_run(db_session=db_session, run_id=run_id, learner_id=learner_id,
                             is_author=is_author, now=now)
    template = "verify/_run.html" if is_htmx(request) else "verify/run_page.html"
    panel = access.run_panel(db_session=db_session, run=run, learner_id=learner_id, slug=slug,
                             prev_id=prev, now=now, revision_id=rev, variant=variant,
                             is_author=is_author)
    return templates.TemplateResponse(request, template, {
        **panel.context(), "prev_id": prev,
        "shown_snippet": access.shown_snippet(run, is_author=is_author)})


@router.get("/questions/{slug}/torchrun.py")
def torchrun_download(
    slug: str, request: Request, db_session: SessionDep, learner_id: CurrentLearner,
    user: OptionalUser, clock: ClockDep,
    variant: Annotated[int | None, Query(ge=0, le=1000)] = None,
) -> Response:
    """The snippet as a torchrun script for the chosen knobs and variant (default: the variant
    the learner is shown), with the variant's values in `params` and its world size; by the one
    rule, once the learner answered that variant (409 before)."""
    target = access.runnable(db_session=db_session, slug=slug, revision_id=None,
                             learner_id=learner_id, variant=variant, allow_exercise=True)
    doc = target.doc
    assert doc.verify is not None and doc.snippet_text is not None
    access.guard_script(db_session=db_session, target=target, learner_id=learner_id,
                        now=clock.now(), is_author=user is not None and user.is_staff)
    world_size, params = knobs.resolve(doc.verify, knobs.from_form(doc.verify, request.query_params))
    variant_name = ""
    if doc.verify.params:
        variant_name = describe_variant(target.variant, dict(doc.verify.params))
    script = torchrun_script(slug=slug, title=doc.title, snippet=doc.snippet_text,
                             world_size=world_size, params=params,
                             timeout_s=doc.verify.timeout_s, variant=variant_name)
    return PlainTextResponse(script, media_type="text/x-python", headers={
        "Content-Disposition": f'attachment; filename="{slug}.py"'})
