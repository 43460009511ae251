"""The JSON API for attempts, the review queue and problem reports (/api/v1).

A learner only ever sees their own data: every route reads the learner from the cookie
(or the signed-in learner account), and another learner's report is a 404."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, HTTPException
from fastapi.responses import JSONResponse

from app.deps import API_BUSY, API_ERROR, ClockDep, CommittingRoute, CurrentLearner, SessionDep, SettingsDep
from app.practice import reports, review
from app.practice.grading import InvalidAnswer, correct_answer
from app.practice.schemas import (
    AttemptIn,
    AttemptOut,
    DueCardOut,
    ReportIn,
    ReportOut,
    ReviewQueueOut,
)
from app.practice.service import AlreadyAnswered, answer_question
from app.questions import service as questions_service

router = APIRouter(prefix="/api/v1", tags=["attempts"], responses=API_BUSY, route_class=CommittingRoute)
learning = APIRouter(prefix="/api/v1", tags=["review and reports"], responses=API_BUSY,
                     route_class=CommittingRoute)


@router.post("/questions/{slug}/attempts", response_model=AttemptOut,
             responses={404: {"description": "No such published question.", **API_ERROR},
                        409: {"model": AttemptOut}, 422: {}})
def post_attempt(
    slug: str, body: AttemptIn, db_session: SessionDep, learner_id: CurrentLearner,
    clock: ClockDep, idempotency_key: Annotated[str | None, Header(max_length=64)] = None,
) -> AttemptOut | JSONResponse:
    """Grade an answer and schedule its review card. Replaying the same Idempotency-Key
    returns the first result with 409."""
    question = questions_service.published_question(db_session=db_session, slug=slug)
    if question is None:
        raise HTTPException(404, f"No question called {slug!r}.")
    doc = question.doc
    try:
        attempt, grade = answer_question(
            db_session=db_session, learner_id=learner_id, question=question,
            raw_answer=body.answer, token=idempotency_key, time_taken_ms=body.time_taken_ms,
            confidence=body.confidence, now=clock.now())
    except InvalidAnswer as exc:
        raise HTTPException(422, str(exc)) from None
    except AlreadyAnswered as exc:
        a = exc.attempt
        out = AttemptOut(attempt_id=a.id, score=a.score, correct=a.correct, answer=a.answer,
                         correct_answer=correct_answer(doc), explanation=doc.explanation,
                         first_submission=False)
        return JSONResponse(out.model_dump(), status_code=409)
    return AttemptOut(attempt_id=attempt.id, score=grade.score, correct=grade.correct,
                      answer=grade.answer, correct_answer=correct_answer(doc),
                      explanation=doc.explanation)


@learning.get("/review/queue", response_model=ReviewQueueOut)
def review_queue(db_session: SessionDep, learner_id: CurrentLearner,
                 clock: ClockDep) -> ReviewQueueOut:
    """Your cards due now (most overdue first, at most 50), with FSRS's predicted recall.
    Answer one with POST /api/v1/questions/{slug}/attempts."""
    now = clock.now()
    due = review.due_cards(db_session=db_session, learner_id=learner_id, now=now)
    return ReviewQueueOut(
        due_count=review.due_count(db_session=db_session, learner_id=learner_id, now=now),
        cards=[DueCardOut(slug=d.question.slug, title=d.question.title, topic=d.question.topic,
                          due=d.card.due, reps=d.card.reps,
                          retrievability=review.retrievability(card=d.card, at=now))
               for d in due],
        next_due=None if due else review.next_due(db_session=db_session, learner_id=learner_id,
                                                  now=now))


def _report_out(row: reports.ReportRow) -> ReportOut:
    r = row.report
    return ReportOut(id=r.id, question=row.slug, title=row.title, revision_id=r.revision_id,
                     kind=r.kind, comment=r.comment, status=r.status,
                     note=r.note, created_at=r.created_at, handled_at=r.handled_at)


@learning.post("/questions/{slug}/reports", response_model=ReportOut, status_code=201,
               responses={404: {}, 422: {}, 429: {}})
def post_report(slug: str, body: ReportIn, db_session: SessionDep, learner_id: CurrentLearner,
                clock: ClockDep, settings: SettingsDep) -> ReportOut:
    """Report a problem with a question you have answered (rate-limited per learner)."""
    question = questions_service.get_published(db_session=db_session, slug=slug)
    if question is None:
        raise HTTPException(404, f"No question called {slug!r}.")
    try:
        report = reports.file_report(db_session=db_session, learner_id=learner_id,
                                     question=question, revision_id=body.revision_id,
                                     kind=body.kind, comment=body.comment, now=clock.now(),
                                     per_hour=settings.reports_per_hour)
    except reports.ReportError as exc:
        raise HTTPException(422, str(exc)) from None
    return _report_out(reports.get_my_report(db_session=db_session, learner_id=learner_id,
                                             report_id=report.id))


@learning.get("/reports", response_model=list[ReportOut])
def list_reports(db_session: SessionDep, learner_id: CurrentLearner) -> list[ReportOut]:
    """Your problem reports, newest first, with the authors' status and note."""
    return [_report_out(r) for r in reports.my_reports(db_session=db_session,
                                                       learner_id=learner_id)]


@learning.get("/reports/{report_id}", response_model=ReportOut, responses={404: {}})
def get_report(report_id: int, db_session: SessionDep, learner_id: CurrentLearner) -> ReportOut:
    """One of your reports; another learner's is a 404."""
    return _report_out(reports.get_my_report(db_session=db_session, learner_id=learner_id,
                                             report_id=report_id))
