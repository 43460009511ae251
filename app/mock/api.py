"""The JSON API for mock interviews (/api/v1).

A learner only ever sees their own data: the learner comes from the cookie (or the signed-in
learner account) and another learner's interview is a 404. Answers get no feedback until the
interview is finished; the deadline is the server's."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy import select
from sqlalchemy.orm import Session

from app import reveal
from app.deps import API_BUSY, ClockDep, CurrentLearner, SessionDep, client_ip
from app.errors import Conflict, InvalidInput, NotFound
from app.mock import service as mock
from app.mock.models import MockInterview
from app.mock.schemas import (
    CalibrationOut,
    MockAnswerIn,
    MockAnswerOut,
    MockIn,
    MockItemOut,
    MockOut,
    MockReportItemOut,
    MockReportOut,
)
from app.questions.models import Question, QuestionRevision
from app.questions.schemas import AskedOut, asked_fields, part_out
from app.questions.service import revision_doc, revision_variant
from app.quizzes.grading import InvalidAnswer
from app.quizzes.models import QuizItem
from app.quizzes.service import AlreadyAnswered, OutOfTurn, partial_answer

router = APIRouter(prefix="/api/v1", tags=["mock interviews"], responses=API_BUSY)


def _mock_or_404(db_session: Session, mock_id: str, learner_id: str) -> MockInterview:
    m = mock.get_mock(db_session=db_session, mock_id=mock_id, learner_id=learner_id)
    if m is None:
        raise NotFound("No such mock interview.")
    return m


def _asked(db_session: Session, m: MockInterview, item: QuizItem) -> AskedOut:
    """An item as the interview asks it: its pinned revision and variant, with the steps taken."""
    revision = db_session.get(QuestionRevision, item.revision_id)
    assert revision is not None
    doc = revision_variant(revision=revision, variant=item.variant)
    partial = (partial_answer(db_session=db_session, learner_id=m.learner_id,
                              question_id=item.question_id, variant=item.variant)
               if doc.is_case or doc.is_talk else None)
    return AskedOut(**asked_fields(doc, variant=item.variant,
                                   variant_count=revision_doc(revision).variant_count,
                                   state=partial.state if partial is not None else None))


def _mock_out(db_session: Session, m: MockInterview) -> MockOut:
    done = mock.answered_item_ids(db_session=db_session, mock=m)
    rows = mock.items(db_session=db_session, mock=m)
    slugs = {q.id: q for q in db_session.scalars(
        select(Question).where(Question.id.in_([i.question_id for i in rows])))}
    # No questions are shown after the end: the report has them, with their keys.
    live = m.finished_at is None
    return MockOut(id=m.quiz_id, minutes=m.minutes, started_at=m.started_at, deadline=m.deadline,
                   finished_at=m.finished_at,
                   items=[MockItemOut(position=i.position, slug=slugs[i.question_id].slug,
                                      title=slugs[i.question_id].title,
                                      revision_id=i.revision_id, answered=i.id in done,
                                      variant=i.variant,
                                      asked=_asked(db_session, m, i) if live and i.id not in done
                                      else None)
                          for i in rows])


@router.post("/mock-interviews", response_model=MockOut, status_code=201,
             responses={422: {}})
def start_mock(body: MockIn, request: Request, db_session: SessionDep,
               learner_id: CurrentLearner, clock: ClockDep) -> MockOut:
    """Start a timed mock interview (10 to 45 minutes). Read each question with
    its `asked` (the variant this interview pinned); answer with POST .../answers before the
    deadline."""
    now = clock.now()
    try:
        m = mock.start(db_session=db_session, learner_id=learner_id, minutes=body.minutes, now=now,
                       client_ip=client_ip(request))
    except mock.NoQuestions:
        raise InvalidInput("There are no published questions to ask yet.") from None
    return _mock_out(db_session, m)


@router.get("/mock-interviews/{mock_id}", response_model=MockOut, responses={404: {}})
def get_mock(mock_id: str, db_session: SessionDep, learner_id: CurrentLearner,
             clock: ClockDep) -> MockOut:
    """One of your mock interviews: its deadline and which questions are answered."""
    m = _mock_or_404(db_session, mock_id, learner_id)
    now = clock.now()
    mock.finish_if_over(db_session=db_session, mock=m, now=now)
    return _mock_out(db_session, m)


@router.post("/mock-interviews/{mock_id}/answers", response_model=MockAnswerOut,
             status_code=201, responses={404: {}, 409: {}, 422: {}})
def answer_mock(mock_id: str, body: MockAnswerIn, request: Request, db_session: SessionDep,
                learner_id: CurrentLearner, clock: ClockDep) -> MockAnswerOut | JSONResponse:
    """Answer question `position`. No grade comes back until the interview is finished; after
    the deadline the answer is refused with 409 and does not count."""
    m = _mock_or_404(db_session, mock_id, learner_id)
    now = clock.now()
    item = next((i for i in mock.items(db_session=db_session, mock=m)
                 if i.position == body.position), None)
    if item is None:
        raise NotFound(f"This interview has no question {body.position}.")
    revision = db_session.get(QuestionRevision, item.revision_id)
    assert revision is not None
    doc = revision_variant(revision=revision, variant=item.variant)
    out = MockAnswerOut(position=body.position, accepted=True,
                        seconds_left=max(0, int((m.deadline - now).total_seconds())))
    try:
        if doc.is_case or doc.is_talk:
            stepped = mock.answer_step(db_session=db_session, mock=m, item=item, part=body.part,
                                       raw_answer=body.answer, confidence=body.confidence, now=now,
                                       client_ip=client_ip(request))
            out.complete = stepped.complete
            if not stepped.complete and doc.is_case and stepped.part is not None:
                out.next_part = part_out(stepped.doc, stepped.part + 1)
            if not stepped.complete and doc.is_talk:
                out.model_answer, out.rubric = stepped.doc.model_answer, list(stepped.doc.rubric)
        else:
            mock.answer(db_session=db_session, mock=m, item=item, raw_answer=body.answer,
                        confidence=body.confidence, now=now, client_ip=client_ip(request))
    except mock.TimeUp:
        mock.finish(db_session=db_session, mock=m, now=now)
        return JSONResponse({"detail": "Time is up: the interview is over and this answer "
                                       "does not count."}, status_code=409)
    except AlreadyAnswered:
        return JSONResponse({"detail": "Already answered; the first answer counts."},
                            status_code=409)
    except OutOfTurn as exc:
        return JSONResponse({"detail": str(exc)}, status_code=409)
    except InvalidAnswer as exc:
        raise InvalidInput(str(exc)) from None
    return out


@router.post("/mock-interviews/{mock_id}/finish", response_model=MockReportOut,
             responses={404: {}})
def finish_mock(mock_id: str, db_session: SessionDep, learner_id: CurrentLearner,
                clock: ClockDep) -> MockReportOut:
    """End the interview now and get its report (misses join your review queue)."""
    m = _mock_or_404(db_session, mock_id, learner_id)
    now = clock.now()
    mock.finish(db_session=db_session, mock=m, now=now)
    return _report_out(db_session, m, now)


@router.get("/mock-interviews/{mock_id}/report", response_model=MockReportOut,
            responses={404: {}, 409: {}})
def mock_report(mock_id: str, db_session: SessionDep, learner_id: CurrentLearner,
                clock: ClockDep) -> MockReportOut:
    """The finished interview's report; 409 while it is still running."""
    m = _mock_or_404(db_session, mock_id, learner_id)
    now = clock.now()
    mock.finish_if_over(db_session=db_session, mock=m, now=now)
    if m.finished_at is None:
        raise Conflict("The interview is still running: no feedback until the end.")
    return _report_out(db_session, m, now)


def _report_out(db_session: Session, m: MockInterview, now: datetime) -> MockReportOut:
    """The report as its owner may read it now (the one rule: an item not answered, or in a
    live mock interview of theirs, without its key, explanation and grade)."""
    r = mock.report(db_session=db_session, mock=m,
                    sight=reveal.sight(db_session=db_session, learner_id=m.learner_id, now=now))
    cal = r.calibration
    return MockReportOut(
        id=m.quiz_id, score=r.score, total=r.total, answered=r.answered,
        elapsed_ms=r.elapsed_ms, started_at=m.started_at, finished_at=m.finished_at,
        per_topic={t.topic: t.score / t.asked for t in r.per_topic if t.asked},
        calibration=CalibrationOut(counts=cal.counts, right=cal.right,
                                   sure_right=cal.sure_right, guessing_wrong=cal.guessing_wrong),
        items=[MockReportItemOut(
            position=i.position, slug=i.question.slug, title=i.doc.title, topic=i.doc.topic,
            variant=i.variant,
            answered=i.attempt is not None,
            score=i.attempt.score if i.attempt and i.shown else None,
            correct=bool(i.attempt and i.attempt.correct) if i.shown else None,
            time_taken_ms=i.attempt.time_taken_ms if i.attempt else None,
            confidence=i.attempt.confidence if i.attempt else None,
            answer=i.attempt.answer if i.attempt else None, correct_answer=i.key,
            explanation=i.doc.explanation if i.missed and i.shown else None,
            withheld=i.note) for i in r.items])
