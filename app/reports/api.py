"""The problem-reports API (/api/v1). A learner only ever sees their own reports: another
learner's is a 404."""

from __future__ import annotations

from fastapi import APIRouter, Request

from app.deps import API_BUSY, ClockDep, CurrentLearner, SessionDep, SettingsDep, client_ip
from app.errors import NotFound
from app.questions import service as questions_service
from app.reports import service as reports
from app.reports.schemas import ReportIn, ReportOut

router = APIRouter(prefix="/api/v1", tags=["reports"], responses=API_BUSY)


def _report_out(row: reports.ReportRow) -> ReportOut:
    r = row.report
    return ReportOut(id=r.id, question=row.slug, title=row.title, revision_id=r.revision_id,
                     variant=r.variant, kind=r.kind, comment=r.comment, status=r.status,
                     note=r.note, created_at=r.created_at, handled_at=r.handled_at)


@router.post("/questions/{slug}/reports", response_model=ReportOut, status_code=201,
               responses={404: {}, 422: {}, 429: {}})
def post_report(slug: str, body: ReportIn, request: Request, db_session: SessionDep,
                learner_id: CurrentLearner,
                clock: ClockDep, settings: SettingsDep) -> ReportOut:
    """Report a problem with a question you have answered (rate-limited per learner)."""
    question = questions_service.get_published(db_session=db_session, slug=slug)
    if question is None:
        raise NotFound(f"No question called {slug!r}.")
    report = reports.file_report(db_session=db_session, learner_id=learner_id,
                                 question=question, revision_id=body.revision_id,
                                 kind=body.kind, comment=body.comment, now=clock.now(),
                                 per_hour=settings.reports_per_hour, variant=body.variant,
                                 client_ip=client_ip(request))
    return _report_out(reports.get_my_report(db_session=db_session, learner_id=learner_id,
                                             report_id=report.id))


@router.get("/reports", response_model=list[ReportOut])
def list_reports(db_session: SessionDep, learner_id: CurrentLearner) -> list[ReportOut]:
    """Your problem reports, newest first, with the authors' status and note."""
    return [_report_out(r) for r in reports.my_reports(db_session=db_session,
                                                       learner_id=learner_id)]


@router.get("/reports/{report_id}", response_model=ReportOut, responses={404: {}})
def get_report(report_id: int, db_session: SessionDep, learner_id: CurrentLearner) -> ReportOut:
    """One of your reports; another learner's is a 404."""
    return _report_out(reports.get_my_report(db_session=db_session, learner_id=learner_id,
                                             report_id=report_id))
