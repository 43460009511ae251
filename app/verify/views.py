"""Verify over HTTP: start (or reuse) a run for a question's knobs, and read a run."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, BackgroundTasks, HTTPException, Path, Query, Request
from fastapi.responses import PlainTextResponse, RedirectResponse, Response
from sqlalchemy import select

from app.authoring.security import client_ip
from app.deps import API_BUSY, API_ERROR, CSRF, CommittingRoute, CurrentLearner, FormDep, SessionDep, is_htmx
from app.practice.models import Quiz, QuizItem
from app.questions.models import STATUS_PUBLISHED, Question, QuestionRevision
from app.questions.schema import QuestionDoc
from app.questions.service import get_published, revision_doc
from app.render.runs import compare
from app.templating import templates
from app.verify import service
from app.verify.expectations import evaluate
from app.verify.models import RUN_DONE, RUN_FAILED, Run
from app.verify.schemas import RunOut, VerifyIn, VerifyOut
from app.verify.torchrun import torchrun_script

api = APIRouter(prefix="/api/v1", tags=["verify"], responses=API_BUSY, route_class=CommittingRoute)

# Database ids are 32-bit on PostgreSQL; a larger number is no run at all.
MAX_ID = 2**31 - 1
RunId = Annotated[int, Path(ge=1, le=MAX_ID)]
# The per-address limit is this many times the per-learner one.
IP_RATE_FACTOR = 4


def _small_int(raw: Any) -> int | None:
    return int(raw) if isinstance(raw, str) and raw.isdigit() and len(raw) < 10 else None

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


def pinned_for(db_session: Any, learner_id: str, revision_id: int) -> bool:
    """True when one of this learner's quizzes is pinned to the revision."""
    return db_session.scalar(
        select(QuizItem.id).join(Quiz, Quiz.id == QuizItem.quiz_id)
        .where(Quiz.learner_id == learner_id, QuizItem.revision_id == revision_id).limit(1)
    ) is not None


def pick_revision(db_session: Any, question: Any, revision_id: int | None,
                  learner_id: str) -> QuestionRevision:
    """The question's published revision, or an older one this learner's quiz is pinned to.

    Never a draft: a learner can only run what a learner can see.
    """
    if revision_id is not None and revision_id != question.current_revision_id:
        revision = db_session.get(QuestionRevision, revision_id)
        if (revision is None or revision.question_id != question.id
                or not pinned_for(db_session, learner_id, revision.id)):
            raise HTTPException(404, "No such revision of this question.")
        return revision
    return question.current_revision


def visible_run(request: Request, db_session: Any, learner_id: str, run_id: int) -> Run:
    """The run if this visitor may see it, else 404.

    Learners see runs of a published question's current revision and of revisions their
    own quizzes are pinned to; authors and admins (signed in) see every run, drafts included.
    """
    from app.authoring.security import current_user

    run = service.get_run(db_session=db_session, run_id=run_id)
    if run is None:
        raise HTTPException(404, f"No run {run_id}.")
    if current_user(request, db_session) is not None:
        return run
    revision = (db_session.get(QuestionRevision, run.question_revision_id)
                if run.question_revision_id else None)
    if revision is not None:
        question = db_session.get(Question, revision.question_id)
        if question is not None and question.status == STATUS_PUBLISHED and (
                question.current_revision_id == revision.id
                or pinned_for(db_session, learner_id, revision.id)):
            return run
    raise HTTPException(404, f"No run {run_id}.")


def runnable_doc(db_session: Any, slug: str, revision_id: int | None,
                 learner_id: str) -> tuple[QuestionRevision, QuestionDoc]:
    """The revision a learner's Verify runs, and its document; 404 if there is nothing to run."""
    question = get_published(db_session=db_session, slug=slug)
    if question is None or question.current_revision is None:
        raise HTTPException(404, f"No question called {slug!r}.")
    revision = pick_revision(db_session, question, revision_id, learner_id)
    doc = revision_doc(revision)
    if doc.verify is None or doc.snippet_text is None:
        raise HTTPException(404, "This question has no snippet to run.")
    return revision, doc


def start_verify(
    request: Request, db_session: Any, learner_id: str, slug: str, params: dict[str, Any],
    background: BackgroundTasks, revision_id: int | None = None,
) -> tuple[Run, bool]:
    """The run answering this question's knobs: cached, shared, or newly queued (rate-limited)."""
    revision, doc = runnable_doc(db_session, slug, revision_id, learner_id)
    torch_v, harness_v = engine_versions()
    try:
        req = service.request_for(doc, params, torch_version=torch_v, harness_version=harness_v,
                                  revision_id=revision.id, requested_by=f"learner:{learner_id}",
                                  requested_ip=client_ip(request))
    except service.InvalidKnob as exc:
        raise HTTPException(
            422, [{"loc": ["body", "params", exc.knob], "msg": exc.message, "type": "knob"}]
        ) from None
    live = service.find_live(db_session=db_session, key=req.key)
    if live is None or live.status == RUN_FAILED:
        limit = request.app.state.settings.verify_rate_per_minute
        used = service.fresh_runs_since(db_session=db_session, requested_by=req.requested_by or "",
                                        seconds=RATE_WINDOW_SECONDS)
        # A cookie is free to drop, so the client's address has a (roomier) limit too:
        # a classroom behind one NAT shares it.
        from_ip = service.fresh_runs_since(db_session=db_session, requested_ip=req.requested_ip,
                                           seconds=RATE_WINDOW_SECONDS)
        if used >= limit or from_ip >= limit * IP_RATE_FACTOR:
            raise HTTPException(
                429, f"Too many new runs in the last minute (limit {limit} per learner); "
                     "runs that are already cached stay free.",
                headers={"Retry-After": str(int(RATE_WINDOW_SECONDS))},
            )
    run, cached = service.request_run(db_session=db_session, req=req)
    if not cached or run.status not in (RUN_DONE,):
        background.add_task(notify_workers, request)
    return run, cached


@api.post("/questions/{slug}/verify", response_model=VerifyOut,
          responses={404: {"description": "No such published question, or it has no snippet.",
                         **API_ERROR}, 422: {}, 429: {"description": "Too many new runs.", **API_ERROR}})
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


@api.get("/runs/{run_id}", response_model=RunOut,
         responses={404: {"description": "No run that this visitor may see.", **API_ERROR}})
def get_run(run_id: RunId, request: Request, db_session: SessionDep,
            learner_id: CurrentLearner) -> RunOut:
    """A run's status and, once done, its measured result."""
    return run_out(visible_run(request, db_session, learner_id, run_id))


# ---- Browser pages: the Verify panel, its polling fragment, and the torchrun script ----

router = APIRouter(include_in_schema=False, route_class=CommittingRoute)


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
    revision = (db_session.get(QuestionRevision, run.question_revision_id)
                if run.question_revision_id else None)
    if revision is not None:
        question = db_session.get(Question, revision.question_id)
        if question is not None and question.status == STATUS_PUBLISHED:
            # The expectations of the revision that ran (a pinned quiz may run an older one).
            doc = revision_doc(revision)
            ctx.update(question=question, doc=doc, slug=question.slug)
            ctx["reveal"] = has_answered(db_session, learner_id, question.id)
            if ctx["reveal"] and run.status == RUN_DONE and run.result and doc.verify:
                ctx["checks"] = evaluate(doc.verify.expect, run.result, dict(run.params or {}),
                                         run.world_size)
    if prev_id and prev_id != run.id:
        prev = service.get_run(db_session=db_session, run_id=prev_id)
        if (prev is not None and prev.question_revision_id == run.question_revision_id
                and prev.status == RUN_DONE and prev.result and run.result):
            ctx["prev"] = prev
            ctx["changes"] = compare(prev.result, run.result)
    return ctx


@router.post("/questions/{slug}/verify")
def verify_form(
    slug: str, request: Request, background: BackgroundTasks, db_session: SessionDep,
    learner_id: CurrentLearner, _: CSRF, form: FormDep
) -> Response:
    prev_id, rev_id = _small_int(form.get("prev")), _small_int(form.get("rev"))
    _revision, doc = runnable_doc(db_session, slug, rev_id, learner_id)
    assert doc.verify is not None
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
    if (prev_run is not None and prev_run.id != run.id and prev_run.status == RUN_DONE
            and prev_run.question_revision_id == run.question_revision_id):
        prev_ctx = _run_context(db_session, learner_id, prev_run, slug, None)
        ctx.update(prev_run=prev_run, prev_checks=prev_ctx["checks"])
        return templates.TemplateResponse(request, "verify/_pair.html", ctx)
    return templates.TemplateResponse(request, "verify/_run.html", ctx)


@router.get("/runs/{run_id}")
def run_page(
    run_id: RunId, request: Request, db_session: SessionDep, learner_id: CurrentLearner,
    slug: str | None = None, prev: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
) -> Response:
    """A run as a page, or (for htmx polling) as the fragment that replaces itself."""
    run = visible_run(request, db_session, learner_id, run_id)
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
