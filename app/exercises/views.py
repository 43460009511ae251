"""Exercise pages: the starter in an editor, Run, and the result of the learner's own code
against the checks (visible ones described, hidden ones counted)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, BackgroundTasks, Request
from fastapi.responses import RedirectResponse, Response

from app.deps import (
    CSRF,
    CurrentLearner,
    FormDep,
    SessionDep,
    SettingsDep,
    client_ip,
    is_htmx,
    notify_workers,
)
from app.errors import DomainError
from app.exercises import service as exercise
from app.templating import templates
from app.verify.models import RUN_DONE
from app.verify.service import PrivateCaps

router = APIRouter(include_in_schema=False)


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
    return templates.TemplateResponse(request, "exercises/exercise.html", {**ctx, "code": ctx["starter"]})


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


def _submission_fragment(request: Request, db_session: SessionDep, slug: str, token: str,
                         learner_id: str) -> Response:
    sub = exercise.submission(db_session=db_session, slug=slug, token=token, learner_id=learner_id)
    return templates.TemplateResponse(request, "exercises/_exercise_result.html",
                                      {"sub": sub, "slug": slug, "run": sub.shown_run})


@router.get("/exercises/{slug}/submissions/{token}")
def exercise_submission_page(slug: str, token: str, request: Request, db_session: SessionDep,
                             learner_id: CurrentLearner) -> Response:
    """A Run's result: the fragment htmx polls, or (without JavaScript) the whole page."""
    if is_htmx(request):
        return _submission_fragment(request, db_session, slug, token, learner_id)
    sub = exercise.submission(db_session=db_session, slug=slug, token=token, learner_id=learner_id)
    ctx = _exercise_ctx(db_session, slug)
    return templates.TemplateResponse(request, "exercises/exercise.html", {
        **ctx, "code": sub.code, "sub": sub, "run": sub.shown_run})
