"""Verify over HTTP: start (or reuse) a run for a question's knobs, and read a run."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, BackgroundTasks, HTTPException, Request
from fastapi.responses import PlainTextResponse, RedirectResponse, Response

from app.deps import CSRF, CurrentLearner, SessionDep, is_htmx
from app.questions.models import QuestionRevision
from app.questions.service import get_published, revision_doc
from app.render.runs import compare
from app.templating import templates
from app.verify import service
from app.verify.expectations import evaluate
from app.verify.models import RUN_DONE, RUN_FAILED, Run
from app.verify.schemas import RunOut, VerifyIn, VerifyOut
from app.verify.torchrun import torchrun_script

api = APIRouter(prefix="/api/v1", tags=["verify"])

# Fresh runs per learner are counted over this window.
RATE_WINDOW_SECONDS = 60.0


def engine_versions() -> tuple[str, str]:
    """(torch version, harness version) that key the cache."""
    from app.verify.engine import HARNESS_VERSION, torch_version

    return torch_version(), HARNESS_VERSION


def notify_workers(request: Request) -> None:
    pool = getattr(request.app.state, "worker_pool", None)
    if pool is not None:
        pool.notify()


def pick_revision(db_session: Any, question: Any, revision_id: int | None) -> QuestionRevision:
    """The question's current revision, or an earlier one of the same question (a pinned quiz)."""
    if revision_id is not None and revision_id != question.current_revision_id:
        revision = db_session.get(QuestionRevision, revision_id)
        if revision is None or revision.question_id != question.id:
            raise HTTPException(404, "No such revision of this question.")
        return revision
    return question.current_revision


def start_verify(
    request: Request, db_session: Any, learner_id: str, slug: str, params: dict[str, Any],
    background: BackgroundTasks, revision_id: int | None = None,
) -> tuple[Run, bool]:
    """The run answering this question's knobs: cached, shared, or newly queued (rate-limited)."""
    question = get_published(db_session=db_session, slug=slug)
    if question is None or question.current_revision is None:
        raise HTTPException(404, f"No question called {slug!r}.")
    revision = pick_revision(db_session, question, revision_id)
    doc = revision_doc(revision)
    if doc.verify is None or doc.snippet_text is None:
        raise HTTPException(404, "This question has no snippet to run.")
    torch_v, harness_v = engine_versions()
    try:
        req = service.request_for(doc, params, torch_version=torch_v, harness_version=harness_v,
                                  revision_id=revision.id, requested_by=f"learner:{learner_id}")
    except service.InvalidKnob as exc:
        raise HTTPException(
            422, [{"loc": ["body", "params", exc.knob], "msg": exc.message, "type": "knob"}]
        ) from None
    live = service.find_live(db_session=db_session, key=req.key)
    if live is None or live.status == RUN_FAILED:
        limit = request.app.state.settings.verify_rate_per_minute
        used = service.fresh_runs_since(db_session=db_session, requested_by=req.requested_by or "",
                                        seconds=RATE_WINDOW_SECONDS)
        if used >= limit:
            raise HTTPException(
                429, f"You started {used} new runs in the last minute (limit {limit}); "
                     "runs that are already cached stay free.",
                headers={"Retry-After": str(int(RATE_WINDOW_SECONDS))},
            )
    run, cached = service.request_run(db_session=db_session, req=req)
    if not cached or run.status not in (RUN_DONE,):
        background.add_task(notify_workers, request)
    return run, cached


@api.post("/questions/{slug}/verify", response_model=VerifyOut,
          responses={404: {}, 422: {}, 429: {}})
def verify_question(
    slug: str, body: VerifyIn, request: Request, background: BackgroundTasks,
    db_session: SessionDep, learner_id: CurrentLearner,
) -> VerifyOut:
    """Run the question's snippet with these knob values, or return the cached run."""
    run, cached = start_verify(request, db_session, learner_id, slug, body.params, background)
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


@api.get("/runs/{run_id}", response_model=RunOut, responses={404: {}})
def get_run(run_id: int, db_session: SessionDep) -> RunOut:
    """A run's status and, once done, its measured result."""
    run = service.get_run(db_session=db_session, run_id=run_id)
    if run is None:
        raise HTTPException(404, f"No run {run_id}.")
    return run_out(run)


# ---- Browser pages: the Verify panel, its polling fragment, and the torchrun script ----

router = APIRouter(include_in_schema=False)


def has_answered(db_session: Any, learner_id: str, question_id: int) -> bool:
    """True once this learner has submitted any answer to the question (the key may be shown)."""
    from sqlalchemy import select

    from app.practice.models import Attempt

    return db_session.scalar(
        select(Attempt.id).where(Attempt.learner_id == learner_id,
                                 Attempt.question_id == question_id).limit(1)
    ) is not None


def parse_knob_form(block: Any, form: Any) -> dict[str, Any]:
    """Knob values from a form; each option's value is the JSON of an allowed value."""
    params: dict[str, Any] = {}
    for name in block.knobs:
        raw = form.get(f"knob.{name}")
        if raw is None or raw == "":
            continue
        try:
            params[name] = json.loads(raw)
        except (TypeError, ValueError):
            params[name] = raw
    return params


def _run_context(db_session: Any, learner_id: str, run: Run, slug: str | None,
                 prev_id: int | None) -> dict[str, Any]:
    ctx: dict[str, Any] = {"run": run, "slug": slug, "prev": None, "prev_id": prev_id,
                           "changes": [], "checks": None,
                           "reveal": False, "doc": None, "question": None}
    if slug:
        question = get_published(db_session=db_session, slug=slug)
        if question is not None and question.current_revision is not None:
            doc = revision_doc(question.current_revision)
            ctx.update(question=question, doc=doc)
            ctx["reveal"] = has_answered(db_session, learner_id, question.id)
            if ctx["reveal"] and run.status == RUN_DONE and run.result and doc.verify:
                ctx["checks"] = evaluate(doc.verify.expect, run.result, dict(run.params or {}),
                                         run.world_size)
    if prev_id and prev_id != run.id:
        prev = service.get_run(db_session=db_session, run_id=prev_id)
        if prev is not None and prev.status == RUN_DONE and prev.result and run.result:
            ctx["prev"] = prev
            ctx["changes"] = compare(prev.result, run.result)
    return ctx


@router.post("/questions/{slug}/verify")
async def verify_form(
    slug: str, request: Request, background: BackgroundTasks, db_session: SessionDep,
    learner_id: CurrentLearner, _: CSRF,
) -> Response:
    question = get_published(db_session=db_session, slug=slug)
    if question is None or question.current_revision is None:
        raise HTTPException(404, f"No question called {slug!r}.")
    doc = revision_doc(question.current_revision)
    if doc.verify is None:
        raise HTTPException(404, "This question has no snippet to run.")
    form = await request.form()
    prev_raw, rev_raw = form.get("prev"), form.get("rev")
    prev_id = int(prev_raw) if isinstance(prev_raw, str) and prev_raw.isdigit() else None
    rev_id = int(rev_raw) if isinstance(rev_raw, str) and rev_raw.isdigit() else None
    try:
        run, cached = start_verify(request, db_session, learner_id, slug,
                                   parse_knob_form(doc.verify, form), background, rev_id)
    except HTTPException as exc:
        if exc.status_code in (422, 429) and is_htmx(request):
            msg = exc.detail if isinstance(exc.detail, str) else "; ".join(
                f"{d['loc'][-1]}: {d['msg']}" for d in exc.detail)
            return templates.TemplateResponse(request, "verify/_error.html", {"message": msg},
                                              status_code=exc.status_code)
        raise
    if not is_htmx(request):
        target = f"/runs/{run.id}?slug={slug}" + (f"&prev={prev_id}" if prev_id else "")
        return RedirectResponse(target, status_code=303)
    ctx = _run_context(db_session, learner_id, run, slug, prev_id)
    ctx["cached"] = cached
    prev_run = service.get_run(db_session=db_session, run_id=prev_id) if prev_id else None
    if prev_run is not None and prev_run.id != run.id and prev_run.status == RUN_DONE:
        prev_ctx = _run_context(db_session, learner_id, prev_run, slug, None)
        ctx.update(prev_run=prev_run, prev_checks=prev_ctx["checks"])
        return templates.TemplateResponse(request, "verify/_pair.html", ctx)
    return templates.TemplateResponse(request, "verify/_run.html", ctx)


@router.get("/runs/{run_id}")
def run_page(
    run_id: int, request: Request, db_session: SessionDep, learner_id: CurrentLearner,
    slug: str | None = None, prev: int | None = None,
) -> Response:
    """A run as a page, or (for htmx polling) as the fragment that replaces itself."""
    run = service.get_run(db_session=db_session, run_id=run_id)
    if run is None:
        raise HTTPException(404, f"No run {run_id}.")
    template = "verify/_run.html" if is_htmx(request) else "verify/run_page.html"
    return templates.TemplateResponse(request, template,
                                      _run_context(db_session, learner_id, run, slug, prev))


@router.get("/questions/{slug}/torchrun.py")
def torchrun_download(slug: str, request: Request, db_session: SessionDep) -> Response:
    question = get_published(db_session=db_session, slug=slug)
    if question is None or question.current_revision is None:
        raise HTTPException(404, f"No question called {slug!r}.")
    doc = revision_doc(question.current_revision)
    if doc.verify is None or doc.snippet_text is None:
        raise HTTPException(404, "This question has no snippet to run.")
    try:
        world_size, params = service.resolve_knobs(doc.verify,
                                                   parse_knob_form(doc.verify, request.query_params))
    except service.InvalidKnob as exc:
        raise HTTPException(422, str(exc)) from None
    script = torchrun_script(slug=slug, title=doc.title, snippet=doc.snippet_text,
                             world_size=world_size, params=params)
    return PlainTextResponse(script, media_type="text/x-python", headers={
        "Content-Disposition": f'attachment; filename="{slug}.py"'})
