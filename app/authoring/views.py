"""Author and admin pages: the question editor, runs, the publish gate, revisions, and the
bank as files (sign-in and accounts are app.accounts.views).

Every route under /author needs a signed-in author (or admin) and every route under
/admin an admin; both are enforced on the router, so a new route cannot forget it
(tests/authoring/test_access.py enumerates them all). Every POST takes `_: CSRF`.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import yaml
from fastapi import APIRouter, BackgroundTasks, Depends, Request
from fastapi.responses import RedirectResponse, Response
from sqlalchemy import select
from starlette.datastructures import FormData, UploadFile

from app.accounts.models import User
from app.authoring import bankfiles, schemas, service
from app.authoring.advice import apply_fix, key_advice
from app.deps import (
    CSRF,
    AdminUser,
    AuthorUser,
    FormDep,
    SessionDep,
    SettingsDep,
    WriteSessionDep,
    client_ip,
    is_htmx,
    notify_workers,
    require_admin,
    require_author,
)
from app.errors import Busy, Conflict, Forbidden, InvalidInput, NotFound, RateLimited
from app.questions.models import STATUS_DRAFT, STATUS_PUBLISHED, STATUS_RETIRED, Question, Topic
from app.questions.schema import Expectation
from app.questions.service import revision_doc
from app.questions.values import describe_variant
from app.render.markdown import highlight_code, render_markdown
from app.templating import templates
from app.verify import gate, knobs
from app.verify import results as verify_results
from app.verify import service as verify_service
from app.verify.expectations import evaluate
from app.verify.models import RUN_QUEUED, RUN_RUNNING, Run
from app.verify.service import PrivateCaps

router = APIRouter(include_in_schema=False)
author = APIRouter(prefix="/author", include_in_schema=False, dependencies=[Depends(require_author)])
admin = APIRouter(prefix="/admin", include_in_schema=False, dependencies=[Depends(require_admin)])


def _page(request: Request, name: str, ctx: dict[str, Any], status: int = 200, **kw: Any) -> Response:
    return templates.TemplateResponse(request, f"authoring/{name}", ctx, status_code=status, **kw)


# The question list -------------------------------------------------------------------------


def _int_or_none(value: str | None) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except ValueError:
        return None


# The question list shows this many rows a page: a bank of hundreds stays one screenful or two.
PAGE_SIZE = 50


@author.get("")
def question_list(
    request: Request, db_session: SessionDep, user: AuthorUser, q: str = "", topic: str = "",
    tag: str = "", difficulty: str = "", status: str = "", verification: str = "",
    page: str = "1",
) -> Response:
    rows = service.list_questions(db_session=db_session, text=q, topic=topic, tag=tag,
                                  difficulty=_int_or_none(difficulty), status=status,
                                  verification=verification)
    pages = max(1, -(-len(rows) // PAGE_SIZE))
    number = min(max(_int_or_none(page) or 1, 1), pages)
    shown = rows[(number - 1) * PAGE_SIZE:number * PAGE_SIZE]
    editable = {r.question.id for r in shown if user.role == "admin" or r.owner_id == user.id}
    topics = list(db_session.scalars(select(Topic).order_by(Topic.position, Topic.slug)))
    filters = {"q": q, "topic": topic, "tag": tag, "difficulty": difficulty, "status": status,
               "verification": verification}
    ctx = {"user": user, "rows": shown, "total": len(rows), "editable": editable, "topics": topics,
           "filters": filters, "page": number, "pages": pages,
           "first": (number - 1) * PAGE_SIZE + 1,
           "query": urlencode({k: v for k, v in filters.items() if v}),
           "statuses": (STATUS_DRAFT, STATUS_PUBLISHED, STATUS_RETIRED),
           "verifications": service.VERIFICATION_STATES}
    if is_htmx(request) and request.headers.get("HX-Target") == "question-rows":
        return _page(request, "_list.html", ctx)
    return _page(request, "list.html", ctx)


# The editor ---------------------------------------------------------------------------------


def _editable_question(db_session: Any, user: User, slug: str, *, for_update: bool = False) -> Question:
    """The question this user may change: 404 if there is none, 403 if it is not theirs."""
    question = service.get_question(db_session=db_session, slug=slug, for_update=for_update)
    if question is None:
        raise NotFound(f"No question called {slug!r}.")
    if not service.can_edit(db_session=db_session, user=user, question=question):
        raise Forbidden("Only the question's author or an admin may change it.")
    return question


def _readable_question(db_session: Any, slug: str) -> Question:
    """Any question, for any author to read (and propose an edit to): 404 if there is none."""
    question = service.get_question(db_session=db_session, slug=slug)
    if question is None:
        raise NotFound(f"No question called {slug!r}.")
    return question


def _editor_ctx(
    db_session: Any, user: User, form: schemas.EditorForm, question: Question | None,
) -> dict[str, Any]:
    topics = list(db_session.scalars(select(Topic).order_by(Topic.position, Topic.slug)))
    ctx: dict[str, Any] = {"user": user, "form": form, "question": question, "topics": topics,
                           "knobs": schemas.knob_choices(form)}
    if question is not None:
        editing = service.editing_revision(db_session=db_session, question=question)
        # Not theirs: the same editor, saving a proposal for an admin to review and publish.
        proposing = not service.can_edit(db_session=db_session, user=user, question=question)
        ctx.update(editing=editing, proposing=proposing,
                   action=f"/author/questions/{question.slug}" + ("/propose" if proposing else ""))
    else:
        ctx.update(editing=None, proposing=False, action="/author/questions")
    return ctx


@author.get("/questions/new")
def new_question(request: Request, db_session: SessionDep, user: AuthorUser, topic: str = "") -> Response:
    form = schemas.EditorForm.blank(topic)
    return _page(request, "editor.html", _editor_ctx(db_session, user, form, None))


@author.post("/questions")
def create_question(
    request: Request, raw: FormDep, db_session: SessionDep, user: AuthorUser, _: CSRF
) -> Response:
    form = schemas.EditorForm.from_form(raw)
    doc = form.to_doc()
    if doc is not None:
        try:
            service.create_question(db_session=db_session, doc=doc, user=user, note=form.note)
        except Conflict as exc:
            form.error("slug", str(exc))
        else:
            return RedirectResponse(f"/author/questions/{doc.slug}?saved=1", status_code=303)
    return _page(request, "editor.html", _editor_ctx(db_session, user, form.with_spare_choices(), None),
                 status=422)


@author.get("/questions/{slug}")
def edit_question(
    request: Request, slug: str, db_session: SessionDep, user: AuthorUser, saved: str = ""
) -> Response:
    question = _readable_question(db_session, slug)
    editing = service.editing_revision(db_session=db_session, question=question)
    form = schemas.EditorForm.from_doc(revision_doc(editing), base_revision_id=editing.id)
    ctx = _editor_ctx(db_session, user, form, question)
    # The key's problems are said once, in the publish gate below the form.
    ctx["message"] = {"1": f"Saved as revision {editing.number}.",
                      "same": "Nothing changed, so no revision was added.",
                      "fixed": f"Answer key fixed: saved as revision {editing.number}; verify "
                               "and publish below.",
                      "proposed": f"Proposed as revision {editing.number}: an admin reviews it and "
                                  "publishes it through the gate."}.get(saved)
    return _page(request, "editor.html", ctx)


@author.post("/questions/{slug}/propose")
def propose_edit(
    request: Request, slug: str, raw: FormDep, db_session: SessionDep, user: AuthorUser, _: CSRF
) -> Response:
    """An author's edit to a question they may not change: saved as a proposal (a draft revision)
    for an admin to review and publish through the gate."""
    question = service.get_question(db_session=db_session, slug=slug, for_update=True)
    if question is None:
        raise NotFound(f"No question called {slug!r}.")
    form = schemas.EditorForm.from_form(raw)
    form.slug = question.slug
    doc = form.to_doc()
    status = 422
    if doc is not None:
        try:
            rev = service.propose_edit(db_session=db_session, question=question, doc=doc, user=user,
                                       note=form.note,
                                       base_revision_id=_int_or_none(form.base_revision_id))
        except service.NotAllowed as exc:
            raise Forbidden(str(exc)) from None
        except Conflict as exc:
            form.error("form", str(exc))
            status = 409
        else:
            return RedirectResponse(f"/author/questions/{slug}?saved={'proposed' if rev else 'same'}",
                                    status_code=303)
    return _page(request, "editor.html",
                 _editor_ctx(db_session, user, form.with_spare_choices(), question), status=status)


@author.post("/questions/{slug}")
def save_question(
    request: Request, slug: str, raw: FormDep, db_session: SessionDep, user: AuthorUser, _: CSRF
) -> Response:
    question = _editable_question(db_session, user, slug, for_update=True)
    form = schemas.EditorForm.from_form(raw)
    form.slug = question.slug
    doc = form.to_doc()
    status = 422
    if doc is not None:
        try:
            rev = service.save_draft(db_session=db_session, question=question, doc=doc, user=user,
                                     note=form.note,
                                     base_revision_id=_int_or_none(form.base_revision_id))
        except Conflict as exc:
            form.error("form", str(exc))
            status = 409
        else:
            return RedirectResponse(f"/author/questions/{slug}?saved={'1' if rev else 'same'}",
                                    status_code=303)
    return _page(request, "editor.html",
                 _editor_ctx(db_session, user, form.with_spare_choices(), question), status=status)


# Previews (htmx) ---------------------------------------------------------------------------


@author.post("/preview/markdown")
def preview_markdown(request: Request, form: FormDep, _: CSRF, field: str = "prompt") -> Response:
    text = form.get(field if field in ("prompt", "explanation") else "prompt")
    return _page(request, "_markdown_preview.html",
                 {"html": render_markdown(text if isinstance(text, str) else "")})


@author.post("/preview/snippet")
def preview_snippet(request: Request, form: FormDep, _: CSRF) -> Response:
    code = schemas.textarea_value(form.get("snippet"))
    error = None
    if code.strip():
        try:
            compile(code, "snippet.py", "exec")
        except SyntaxError as exc:
            error = f"Python syntax error on line {exc.lineno}: {exc.msg}"
    return _page(request, "_snippet_preview.html",
                 {"html": highlight_code(code) if code.strip() else "", "error": error})


@author.post("/preview/question")
def preview_question(request: Request, raw: FormDep, db_session: SessionDep, user: AuthorUser,
                     _: CSRF) -> Response:
    """The editor's question as a learner would see it; with variables, every variant side by
    side with its values, its key and, once run, what torch measured."""
    form = schemas.EditorForm.from_form(raw)
    if not form.slug:
        form.slug = "preview"
    doc = form.to_doc()
    previews = (service.variant_previews(db_session=db_session, doc=doc, user=user)
                if doc is not None else [])
    shown = previews[0].doc if previews and previews[0].doc is not None else doc
    return _page(request, "_question_preview.html",
                 {"doc": shown, "template_doc": doc, "fmt": shown.effective_format if shown else "",
                  "form": form, "previews": previews if doc is not None and doc.variables else [],
                  "key": previews[0].key if previews else None,
                  "advice": key_advice(doc) if doc else []})


# Runs: Run now, the measured result, "expect this" -------------------------------------------


def _run_ctx(run: Run, expect_text: str | None,
             expectations: list[Expectation] | None = None) -> dict[str, Any]:
    """A run in the editor, checked against `expectations` (a variant's, rendered) or else
    the expectations YAML as typed."""
    checks = None
    result = verify_results.result_of(run)
    if result is not None and (expectations is not None or expect_text is not None):
        try:
            if expectations is None:
                data = yaml.safe_load(expect_text or "") if (expect_text or "").strip() else []
                expectations = [Expectation.model_validate(e) for e in data or []]
            checks = evaluate(expectations, result, dict(run.params or {}), run.world_size)
        except Exception:  # the author is mid-edit; the values are still worth showing
            checks = None
    return {"run": run, "result": result, "checks": checks,
            "polling": run.status in (RUN_QUEUED, RUN_RUNNING)}


def _variant_runs_ctx(doc: Any, runs: list[tuple[int, Run]]) -> list[dict[str, Any]]:
    """Each variant's run in the editor, checked against that variant's own expectations."""
    out = []
    for i, run in runs:
        variant = doc.render(i)
        ctx = _run_ctx(run, None, list(variant.verify.expect) if variant.verify else [])
        ctx.update(variant=i, variant_name=describe_variant(i, doc.variant_params(i)))
        out.append(ctx)
    return out


@author.post("/run")
def run_now(request: Request, raw: FormDep, background: BackgroundTasks, db_session: SessionDep,
            user: AuthorUser, settings: SettingsDep, _: CSRF) -> Response:
    """Run the snippet as it stands in the editor (saved or not) with the chosen knobs."""
    form = schemas.EditorForm.from_form(raw)
    if not form.slug:
        form.slug = "unsaved"
    doc = form.to_doc()
    if doc is None or doc.verify is None or doc.snippet_text is None:
        return _page(request, "_run_result.html",
                     {"run": None, "form_errors": form.errors if doc is None else
                      {"snippet": ["write a snippet to run"]}}, status=422)
    try:
        common: dict[str, Any] = {"db_session": db_session, "user": user,
                  "params": knobs.from_form(doc.verify, raw), "client_ip": client_ip(request),
                  "caps": PrivateCaps.from_settings(settings), "fresh": raw.get("fresh") == "1",
                  "limit_per_minute": settings.author_run_rate_per_minute}
        if doc.variables:
            runs = service.run_draft_variants(doc=doc, **common)
        else:
            run = service.run_draft(doc=doc, **common)
    except knobs.InvalidKnob as exc:
        return _page(request, "_run_result.html",
                     {"run": None, "form_errors": {"knobs": [str(exc)]}}, status=422)
    except (RateLimited, Busy) as exc:
        return _page(request, "_run_result.html",
                     {"run": None, "form_errors": {"snippet": [str(exc)]}}, status=exc.status,
                     headers=exc.headers)
    # After the response, so after the commit: a worker woken sooner finds no run yet and
    # sleeps until its next poll.
    background.add_task(notify_workers, request)
    if doc.variables:
        # Every variant at once: each polls on its own and is checked against its own values.
        return _page(request, "_variant_runs.html", {"variant_runs": _variant_runs_ctx(doc, runs)})
    return _page(request, "_run_result.html", _run_ctx(run, form.expect))


@author.get("/runs/{run_id}")
def run_result(
    request: Request, run_id: int, db_session: SessionDep, expect: str | None = None
) -> Response:
    run = verify_service.get_run(db_session=db_session, run_id=run_id)
    if run is None:
        raise NotFound(f"No run {run_id}.")
    return _page(request, "_run_result.html", _run_ctx(run, expect))


@author.post("/runs/{run_id}")
def variant_run_result(
    request: Request, run_id: int, raw: FormDep, db_session: SessionDep, _: CSRF,
) -> Response:
    """A variant's run in the editor, polled with the editor's fields: checked against the
    expectations of that variant as the form now renders it."""
    run = verify_service.get_run(db_session=db_session, run_id=run_id)
    if run is None:
        raise NotFound(f"No run {run_id}.")
    form = schemas.EditorForm.from_form(raw)
    if not form.slug:
        form.slug = "unsaved"
    doc = form.to_doc()
    variant = _int_or_none(str(raw.get("variant") or ""))
    if doc is None or not doc.variables or variant is None or not 0 <= variant < doc.variant_count:
        return _page(request, "_run_result.html", _run_ctx(run, None))
    [ctx] = _variant_runs_ctx(doc, [(variant, run)])
    return _page(request, "_run_result.html", ctx)


@author.post("/expect")
def expect_this(request: Request, form: FormDep, db_session: SessionDep, _: CSRF) -> Response:
    """Add "value `name` on `rank` equals what run `run_id` measured" to the editor's expectations.

    The value is read from the stored run, never from the request; the editor's text
    area is returned with the new expectation, to be saved with the draft.
    """
    expect_text = schemas.textarea_value(form.get("expect"))
    error = None
    try:
        run_id, rank = int(str(form.get("run_id"))), int(str(form.get("rank")))
    except ValueError:
        raise InvalidInput("run_id and rank must be numbers") from None
    name = str(form.get("name") or "")
    run = verify_service.get_run(db_session=db_session, run_id=run_id)
    result = verify_results.result_of(run) if run is not None else None
    measured = result.rank_or_none(rank) if result is not None else None
    if run is None or measured is None or name not in measured.values:
        raise NotFound(f"Run {run_id} has no value {name!r} on rank {rank}.")
    try:
        when = dict(run.params or {})
        expect_text = schemas.add_value_expectation(
            expect_text, name=name, rank=rank, value=measured.values[name], when=when)
        # The new check only counts if an audited run applies to it: audit these knobs too.
        audit_text = schemas.textarea_value(form.get("audit")) or "default"
        new_audit = schemas.audit_including(audit_text, schemas.textarea_value(form.get("knobs")),
                                            when)
        message = f"Added: {name} on rank {rank}. Save to keep it."
    except (ValueError, yaml.YAMLError) as exc:
        error, message, new_audit = f"Could not add it: {exc}", None, None
    form_state = schemas.EditorForm(expect=expect_text)
    if new_audit is not None:
        form_state.audit = new_audit
        message = f"{message} Its knob values were added to the audited combinations."
    if error:
        form_state.error("expect", error)
    return _page(request, "_expect_field.html", {"form": form_state, "expect_message": message,
                                                 "audit_added": new_audit is not None})


# Verification and publishing ---------------------------------------------------------------


def _gate_ctx(db_session: Any, user: User, question: Question) -> dict[str, Any]:
    rev = service.publishable_revision(db_session=db_session, question=question)
    g = None
    if rev is not None:
        g = gate.check(db_session=db_session, revision=rev, versions=verify_service.engine_versions())
    return {"user": user, "question": question, "revision": rev, "gate": g,
            "polling": bool(g and g.pending),
            "advice": key_advice(revision_doc(rev)) if rev is not None and g and g.binding_problems
            else []}


@author.post("/questions/{slug}/fix-key")
def fix_key(slug: str, form: FormDep, db_session: SessionDep, user: AuthorUser, _: CSRF) -> Response:
    """Apply one of the gate's offered fixes to the answer key, as a new draft revision."""
    question = _editable_question(db_session, user, slug, for_update=True)
    editing = service.editing_revision(db_session=db_session, question=question)
    doc = revision_doc(editing)
    wanted = str(form.get("fix") or "")
    # Only a fix the rule offers for the draft as it is now: a stale page's button fails here.
    fix = next((a.fix for a in key_advice(doc) if a.fix is not None and a.fix.label == wanted), None)
    if fix is None:
        raise Conflict("That fix no longer applies: the draft changed. Reload the editor.")
    service.save_draft(db_session=db_session, question=question, doc=apply_fix(doc, fix), user=user,
                       note=f"Answer key fixed from the gate: {fix.label.lower()}",
                       base_revision_id=editing.id)
    return RedirectResponse(f"/author/questions/{slug}?saved=fixed", status_code=303)


@author.get("/questions/{slug}/gate")
def gate_panel(request: Request, slug: str, db_session: SessionDep, user: AuthorUser) -> Response:
    question = _editable_question(db_session, user, slug)
    return _page(request, "_gate.html", _gate_ctx(db_session, user, question))


@author.post("/questions/{slug}/verify")
def verify_all(
    request: Request, slug: str, form: FormDep, background: BackgroundTasks, db_session: SessionDep,
    user: AuthorUser, settings: SettingsDep, _: CSRF
) -> Response:
    """Queue a run for every audited knob combination of the draft (cached ones are reused)."""
    question = _editable_question(db_session, user, slug)
    if service.request_verification(db_session=db_session, question=question, user=user,
                                    fresh=form.get("fresh") == "1",
                                    limit_per_minute=settings.author_run_rate_per_minute):
        background.add_task(notify_workers, request)  # after the commit, as in run_now
    return _page(request, "_gate.html", _gate_ctx(db_session, user, question))


def _prefill_cache(request: Request) -> None:
    """Background task after an import or a publish: queue every published question's
    audited knob combinations, so that learners' first Verify is a cache hit."""
    from app.verify.audit import queue_published

    queue_published(request.app.state.sessionmaker)
    notify_workers(request)


@author.post("/questions/{slug}/publish")
def publish(
    request: Request, slug: str, form: FormDep, db_session: SessionDep, user: AuthorUser, _: CSRF,
    background: BackgroundTasks,
) -> Response:
    question = _editable_question(db_session, user, slug, for_update=True)
    try:
        if form.get("override") == "1":
            service.publish_without_check(db_session=db_session, question=question, user=user,
                                          reason=str(form.get("reason") or ""))
        else:
            service.publish(db_session=db_session, question=question, user=user,
                            versions=verify_service.engine_versions())
    except service.NotAllowed as exc:
        raise Forbidden(str(exc)) from None
    except service.PublishRefused as exc:
        ctx = {**_gate_ctx(db_session, user, question), "error": f"Not published: {exc}"}
        return _page(request, "_gate.html" if is_htmx(request) else "gate.html", ctx, status=409)
    background.add_task(_prefill_cache, request)
    target = f"/author/questions/{slug}/history?published=1"
    if is_htmx(request):
        return Response(status_code=204, headers={"HX-Redirect": target})
    return RedirectResponse(target, status_code=303)


@author.post("/questions/{slug}/retire")
def retire(slug: str, db_session: SessionDep, user: AuthorUser, _: CSRF) -> Response:
    question = _editable_question(db_session, user, slug, for_update=True)
    service.retire(db_session=db_session, question=question, user=user)
    return RedirectResponse(f"/author/questions/{slug}/history", status_code=303)


# History, diff, revert ---------------------------------------------------------------------


@author.get("/questions/{slug}/history")
def history(
    request: Request, slug: str, db_session: SessionDep, user: AuthorUser, published: str = ""
) -> Response:
    question = _readable_question(db_session, slug)
    revisions = service.list_revisions(db_session=db_session, question=question)
    authors = service.author_names(db_session=db_session, revisions=revisions)
    return _page(request, "history.html", {
        "user": user, "question": question, "revisions": revisions, "authors": authors,
        "can_edit": service.can_edit(db_session=db_session, user=user, question=question),
        "message": "Published: learners now see it." if published else None})


@author.get("/questions/{slug}/diff")
def diff(
    request: Request, slug: str, db_session: SessionDep, user: AuthorUser, a: int = 0, b: int = 0
) -> Response:
    question = _readable_question(db_session, slug)
    old = service.get_revision(db_session=db_session, question=question, number=a)
    new = service.get_revision(db_session=db_session, question=question, number=b)
    if old is None or new is None:
        raise NotFound(f"{slug!r} has no revision {a if old is None else b}.")
    return _page(request, "diff.html", {"user": user, "question": question, "a": old, "b": new,
                                        "lines": service.diff_revisions(old, new)})


@author.post("/questions/{slug}/revert")
def revert(
    request: Request, slug: str, form: FormDep, db_session: SessionDep, user: AuthorUser, _: CSRF
) -> Response:
    question = _editable_question(db_session, user, slug, for_update=True)
    number = _int_or_none(str(form.get("number") or ""))
    if number is None:
        raise InvalidInput("Say which revision to revert to.")
    service.revert(db_session=db_session, question=question, number=number, user=user)
    return RedirectResponse(f"/author/questions/{slug}?saved=1", status_code=303)


# The bank as files (admin) -----------------------------------------------------------------


@admin.get("/bank")
def bank_page(request: Request, user: AdminUser) -> Response:
    return _page(request, "bank.html", {"user": user, "limits": {
        "mb": bankfiles.MAX_UPLOAD_BYTES // (1024 * 1024), "files": bankfiles.MAX_UPLOAD_FILES}})


def _read_upload(form: FormData) -> tuple[dict[str, bytes], list[str], str]:
    """(bank files, skipped names, a name for the upload) from a zip or a folder upload."""
    archive = form.get("archive")
    uploads = [f for f in form.getlist("files") if isinstance(f, UploadFile) and f.filename]
    # The form was parsed on the event loop; its files are spooled, so reading them here
    # in the thread pool blocks nobody.
    if isinstance(archive, UploadFile) and archive.filename:
        data = archive.file.read(bankfiles.MAX_UPLOAD_BYTES + 1)
        if len(data) > bankfiles.MAX_UPLOAD_BYTES:
            raise bankfiles.UploadError("the zip is larger than the upload limit")
        files, skipped = bankfiles.files_from_zip(data)
        return files, skipped, archive.filename
    if uploads:
        items, total = [], 0
        for f in uploads:
            content = f.file.read(bankfiles.MAX_UPLOAD_BYTES - total + 1)
            total += len(content)
            if total > bankfiles.MAX_UPLOAD_BYTES:
                raise bankfiles.UploadError("the folder is larger than the upload limit")
            items.append((f.filename or "", content))
        files, skipped = bankfiles.files_from_folder(items)
        return files, skipped, f"{len(uploads)} files"
    raise bankfiles.UploadError("choose a zip file or a folder to upload")


@admin.post("/bank/upload")
def bank_upload(
    request: Request, form: FormDep, db_session: SessionDep, user: AdminUser, _: CSRF
) -> Response:
    try:
        files, skipped, name = _read_upload(form)
    except bankfiles.UploadError as exc:
        service.refuse_upload(db_session=db_session, user=user, reason=str(exc))
        return _page(request, "bank.html", {"user": user, "error": f"Upload refused: {exc}",
                                            "limits": {"mb": bankfiles.MAX_UPLOAD_BYTES // 2**20,
                                                       "files": bankfiles.MAX_UPLOAD_FILES}},
                     status=422)
    report = service.receive_upload(db_session=db_session, user=user, filename=name, files=files,
                                    skipped=skipped)
    return _page(request, "bank_report.html", {"user": user, "report": report},
                 status=200 if report.ok else 422)


@admin.post("/bank/import")
def bank_import(
    request: Request, form: FormDep, db_session: SessionDep, user: AdminUser, _: CSRF,
    background: BackgroundTasks,
) -> Response:
    report, result = service.confirm_import(
        db_session=db_session, user=user, upload_id=str(form.get("upload_id") or ""),
        retire_missing=form.get("retire_missing") == "1")
    if result is None:
        return _page(request, "bank_report.html", {"user": user, "report": report}, status=422)
    background.add_task(_prefill_cache, request)
    return _page(request, "bank_report.html", {"user": user, "report": report, "imported": result})


@admin.get("/bank/export.zip")
def bank_export(db_session: WriteSessionDep, user: AdminUser) -> Response:
    data = service.export_zip(db_session=db_session, user=user)
    return Response(data, media_type="application/zip",
                    headers={"Content-Disposition": 'attachment; filename="question_bank.zip"'})


router.include_router(author)
router.include_router(admin)
