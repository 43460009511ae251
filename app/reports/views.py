"""Problem reports: a learner files one after answering, reads "my reports", and authors work
through them in their inbox under /author/reports."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from app.authoring import service as authoring
from app.deps import (
    CSRF,
    AuthorUser,
    ClockDep,
    CurrentLearner,
    FormDep,
    SessionDep,
    SettingsDep,
    client_ip,
    is_htmx,
    require_author,
)
from app.errors import NotFound
from app.questions import service as questions_service
from app.reports import service as reports
from app.stats import service as stats
from app.templating import templates

router = APIRouter(include_in_schema=False)
inbox = APIRouter(prefix="/author/reports", include_in_schema=False,
                  dependencies=[Depends(require_author)])


def _int_field(value: Any) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None


@router.post("/questions/{slug}/report")
def report_problem(
    request: Request, slug: str, form: FormDep, db_session: SessionDep,
    learner_id: CurrentLearner, clock: ClockDep, settings: SettingsDep, _: CSRF,
) -> Response:
    question = questions_service.get_published(db_session=db_session, slug=slug)
    if question is None:
        raise NotFound(f"No question called {slug!r}.")
    ctx: dict[str, Any] = {"report_action": f"/questions/{slug}/report", "question": question,
                           "revision_id": _int_field(form.get("revision_id")),
                           "variant": _int_field(form.get("variant")),
                           "report_open": True}
    status = 200
    try:
        row = reports.file_report(
            db_session=db_session, learner_id=learner_id, question=question,
            revision_id=ctx["revision_id"], kind=str(form.get("kind") or ""),
            comment=str(form.get("comment") or ""), now=clock.now(),
            per_hour=settings.reports_per_hour, variant=ctx["variant"],
            client_ip=client_ip(request))
        ctx["filed"] = row
    except reports.ReportError as exc:
        ctx.update(error=str(exc), kind=form.get("kind"), comment=form.get("comment"))
        status = 422
    if is_htmx(request):
        return templates.TemplateResponse(request, "reports/_report_form.html", ctx,
                                          status_code=status)
    return templates.TemplateResponse(request, "reports/report_filed.html", ctx,
                                      status_code=status)


@router.get("/reports")
def my_reports_page(request: Request, db_session: SessionDep,
                    learner_id: CurrentLearner) -> Response:
    """The learner's own problem reports and what the authors did with them."""
    return templates.TemplateResponse(request, "reports/my_reports.html", {
        "reports": reports.my_reports(db_session=db_session, learner_id=learner_id)})


# The authors' inbox (every route needs an author: the router says so) ---------------------


def _flags(db_session: SessionDep, user: AuthorUser) -> dict[str, Any]:
    """The item-statistics flags beside the reports, over the whole bank: every author may read
    every question and propose an edit to it."""
    return {"flags": stats.flagged(db_session=db_session),
            "min_attempts": stats.MIN_ATTEMPTS, "flag_text": stats.FLAG_TEXT}


@inbox.get("")
def inbox_page(request: Request, db_session: SessionDep, user: AuthorUser,
               done: str = "") -> Response:
    """Open reports by question; after resolving or declining one, what was done, with Undo."""
    handled = None
    if done.isdigit() and len(done) < 10:
        handled = reports.get_report_row(db_session=db_session, report_id=int(done))
        if handled is not None and handled.report.status == reports.REPORT_OPEN:
            handled = None
    return templates.TemplateResponse(request, "reports/inbox.html", {
        "user": user, "groups": reports.inbox(db_session=db_session), "handled": handled,
        "proposals": authoring.proposals(db_session=db_session)})


@inbox.get("/flags")
def inbox_flags(request: Request, db_session: SessionDep, user: AuthorUser) -> Response:
    """The flagged items beside the reports: the inbox loads them after itself, since they
    aggregate every first attempt of the bank."""
    name = "stats/_flags.html" if is_htmx(request) else "stats/flags.html"
    return templates.TemplateResponse(request, name, {"user": user, **_flags(db_session, user)})


@inbox.post("/{report_id}")
def handle_report(
    request: Request, report_id: int, form: FormDep, db_session: SessionDep, user: AuthorUser,
    clock: ClockDep, _: CSRF,
) -> Response:
    try:
        reports.handle_report(db_session=db_session, report_id=report_id, user=user,
                              status=str(form.get("status") or ""),
                              note=str(form.get("note") or ""), now=clock.now())
    except reports.ReportError as exc:
        return templates.TemplateResponse(request, "reports/inbox.html", {
            "user": user, "groups": reports.inbox(db_session=db_session), "error": str(exc),
            "proposals": authoring.proposals(db_session=db_session)}, status_code=422)
    return RedirectResponse(f"/author/reports?done={report_id}", status_code=303)


@inbox.post("/{report_id}/reopen")
def reopen_report(report_id: int, db_session: SessionDep, user: AuthorUser, _: CSRF) -> Response:
    """Undo: the report is open again."""
    reports.reopen_report(db_session=db_session, report_id=report_id, user=user)
    return RedirectResponse(f"/author/reports#report-{report_id}", status_code=303)


router.include_router(inbox)
