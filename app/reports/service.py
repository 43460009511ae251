"""Problem reports: a learner reports a problem with the revision they answered; authors see
open reports grouped by question and resolve or decline them with a note. Audited."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from app import ratelimit
from app.accounts import service as accounts
from app.accounts.models import User
from app.accounts.service import ensure_learner
from app.errors import InvalidInput, NotFound
from app.questions.models import Question, QuestionRevision
from app.questions.service import revision_doc
from app.quizzes.models import Attempt
from app.reports.models import REPORT_DECLINED, REPORT_KINDS, REPORT_OPEN, REPORT_RESOLVED, ProblemReport

# Long enough to say what is wrong; short enough that the inbox stays readable.
MAX_COMMENT_CHARS = 2000
MAX_NOTE_CHARS = 2000
RATE_WINDOW = timedelta(hours=1)
# An address may send this many times one learner's reports (a classroom shares one).
REPORT_ADDRESS_FACTOR = 4


class ReportError(InvalidInput):
    """A report that cannot be filed or handled as asked (bad kind, too long, not answered)."""


def _learner_label(learner_id: str) -> str:
    # The audit log's actor column: a learner is named by a prefix of their random id.
    return f"learner:{learner_id[:8]}"


def file_report(
    *, db_session: Session, learner_id: str, question: Question, revision_id: int | None,
    kind: str, comment: str, now: datetime, per_hour: int, variant: int | None = None,
    client_ip: str | None = None,
) -> ProblemReport:
    """Store a learner's report against the revision and variant they answered (the current
    revision if the given id is not a revision of this question; variant 0 if the revision has
    no such variant). Raises ReportError or RateLimited."""
    if kind not in REPORT_KINDS:
        raise ReportError(f"Choose what is wrong: one of {', '.join(REPORT_KINDS)}.")
    comment = comment.strip()
    if len(comment) > MAX_COMMENT_CHARS:
        raise ReportError(f"Keep the comment under {MAX_COMMENT_CHARS} characters.")
    answered = db_session.scalar(select(Attempt.id).where(
        Attempt.learner_id == learner_id, Attempt.question_id == question.id).limit(1))
    if answered is None:
        raise ReportError("Answer the question first; then you can report a problem with it.")
    ratelimit.hit(db_session=db_session, bucket="report", key=learner_id, limit=per_hour,
                  window_s=RATE_WINDOW.total_seconds(), now=now,
                  message=f"You have sent {per_hour} reports in the last hour; thank you, and "
                          "please wait a while before sending more.")
    if client_ip is not None:
        # A fresh cookie is a new learner: the address is bounded too, as for every write.
        ratelimit.hit(db_session=db_session, bucket="report-ip", key=client_ip,
                      limit=per_hour * REPORT_ADDRESS_FACTOR,
                      window_s=RATE_WINDOW.total_seconds(), now=now,
                      message=f"Too many reports from your network in the last hour (at most "
                              f"{per_hour * REPORT_ADDRESS_FACTOR}); please wait a while.")
    revision = db_session.get(QuestionRevision, revision_id) if revision_id else None
    if revision is None or revision.question_id != question.id:
        revision_id = question.current_revision_id
    else:
        revision_id = revision.id
    assert revision_id is not None
    reported = revision if revision is not None and revision.id == revision_id else \
        db_session.get(QuestionRevision, revision_id)
    assert reported is not None
    count = revision_doc(reported).variant_count
    shown = variant if isinstance(variant, int) and 0 <= variant < count else 0
    ensure_learner(db_session=db_session, learner_id=learner_id)
    report = ProblemReport(learner_id=learner_id, question_id=question.id, revision_id=revision_id,
                           variant=shown, kind=kind, comment=comment, status=REPORT_OPEN,
                           created_at=now)
    db_session.add(report)
    db_session.flush()
    accounts.audit(db_session=db_session, user=None, actor=_learner_label(learner_id),
                   action="report.create", target=question.slug,
                   detail={"report": report.id, "kind": kind, "revision_id": revision_id,
                           "variant": shown})
    return report


@dataclass
class ReportRow:
    report: ProblemReport
    slug: str
    title: str


def _rows(db_session: Session, stmt: object) -> list[ReportRow]:
    return [ReportRow(r, slug, title) for r, slug, title in db_session.execute(stmt)]  # type: ignore[call-overload]


def my_reports(*, db_session: Session, learner_id: str) -> list[ReportRow]:
    """The learner's own reports, newest first."""
    stmt = (select(ProblemReport, Question.slug, Question.title)
            .join(Question, Question.id == ProblemReport.question_id)
            .where(ProblemReport.learner_id == learner_id)
            .order_by(ProblemReport.created_at.desc(), ProblemReport.id.desc()))
    return _rows(db_session, stmt)


def get_my_report(*, db_session: Session, learner_id: str, report_id: int) -> ReportRow:
    """One of the learner's own reports; anyone else's does not exist for them (NotFound)."""
    stmt = (select(ProblemReport, Question.slug, Question.title)
            .join(Question, Question.id == ProblemReport.question_id)
            .where(ProblemReport.id == report_id, ProblemReport.learner_id == learner_id))
    rows = _rows(db_session, stmt)
    if not rows:
        raise NotFound(f"No report {report_id}.")
    return rows[0]


@dataclass
class InboxGroup:
    question_id: int
    slug: str
    title: str
    reports: list[ProblemReport] = field(default_factory=list)
    # Each report's revision as History numbers it (#1, #2), never its database id.
    revision_numbers: dict[int, int] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return len(self.reports)


def inbox(*, db_session: Session) -> list[InboxGroup]:
    """Open reports grouped by question, the most reported question first."""
    stmt = (select(ProblemReport, Question.slug, Question.title)
            .join(Question, Question.id == ProblemReport.question_id)
            .where(ProblemReport.status == REPORT_OPEN)
            .order_by(ProblemReport.created_at, ProblemReport.id))
    groups: dict[int, InboxGroup] = {}
    for row in _rows(db_session, stmt):
        qid = row.report.question_id
        groups.setdefault(qid, InboxGroup(qid, row.slug, row.title)).reports.append(row.report)
    revision_ids = {r.revision_id for g in groups.values() for r in g.reports if r.revision_id}
    numbers = dict(db_session.execute(select(QuestionRevision.id, QuestionRevision.number)
                                      .where(QuestionRevision.id.in_(revision_ids))).all()) \
        if revision_ids else {}
    for g in groups.values():
        g.revision_numbers = {r.id: numbers[r.revision_id] for r in g.reports
                              if r.revision_id in numbers}
    return sorted(groups.values(), key=lambda g: (-g.count, g.slug))


def handle_report(*, db_session: Session, report_id: int, user: User, status: str, note: str,
                  now: datetime) -> ProblemReport:
    """An author resolves or declines a report with a note. Audited."""
    if status not in (REPORT_RESOLVED, REPORT_DECLINED):
        raise ReportError("A report is resolved or declined.")
    note = note.strip()
    if len(note) > MAX_NOTE_CHARS:
        raise ReportError(f"Keep the note under {MAX_NOTE_CHARS} characters.")
    report = db_session.get(ProblemReport, report_id)
    if report is None:
        raise NotFound(f"No report {report_id}.")
    report.status = status
    report.note = note
    report.handled_by = user.id
    report.handled_at = now
    db_session.flush()
    accounts.audit(db_session=db_session, user=user, action=f"report.{status}",
                   target=str(report.id), detail={"question_id": report.question_id})
    return report


def reopen_report(*, db_session: Session, report_id: int, user: User) -> ProblemReport:
    """Undo a resolve or decline: the report is open again, its note kept for the next try.
    Audited."""
    report = db_session.get(ProblemReport, report_id)
    if report is None:
        raise NotFound(f"No report {report_id}.")
    if report.status == REPORT_OPEN:
        return report
    was = report.status
    report.status = REPORT_OPEN
    report.handled_by = None
    report.handled_at = None
    db_session.flush()
    accounts.audit(db_session=db_session, user=user, action="report.reopen",
                   target=str(report.id), detail={"question_id": report.question_id, "was": was})
    return report


def get_report_row(*, db_session: Session, report_id: int) -> ReportRow | None:
    """A report with its question's slug and title (for the inbox's confirmation)."""
    rows = _rows(db_session, select(ProblemReport, Question.slug, Question.title)
                 .join(Question, Question.id == ProblemReport.question_id)
                 .where(ProblemReport.id == report_id))
    return rows[0] if rows else None
