"""The review API (/api/v1): the learner's due cards and their FSRS schedule."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter
from fsrs.scheduler import DEFAULT_PARAMETERS
from sqlalchemy.orm import Session

from app.deps import API_BUSY, ClockDep, CurrentLearner, SessionDep
from app.questions.models import Question
from app.questions.service import revision_doc, revision_variant
from app.quizzes.service import drawn_variant
from app.review import service as review
from app.review.models import ScheduleFit
from app.review.schemas import DueCardOut, FitOut, RetentionIn, ReviewQueueOut, ScheduleOut, WorkloadOut


def _asked(db_session: Session, learner_id: str, question: Question) -> tuple[int, str]:
    """The variant a due card is reviewed with, and its prompt."""
    assert question.current_revision is not None
    count = revision_doc(question.current_revision).variant_count
    variant = drawn_variant(db_session=db_session, learner_id=learner_id, question_id=question.id,
                            count=count)
    return variant, revision_variant(revision=question.current_revision, variant=variant).prompt


def _card_out(db_session: Session, learner_id: str, due: review.DueCard, now: datetime,
              scheduler: Any) -> DueCardOut:
    variant, prompt = _asked(db_session, learner_id, due.question)
    return DueCardOut(slug=due.question.slug, title=due.question.title, topic=due.question.topic,
                      due=due.card.due, reps=due.card.reps,
                      retrievability=review.retrievability(card=due.card, at=now,
                                                          scheduler=scheduler),
                      variant=variant, prompt=prompt)

router = APIRouter(prefix="/api/v1", tags=["review"], responses=API_BUSY)


@router.get("/review/queue", response_model=ReviewQueueOut)
def review_queue(db_session: SessionDep, learner_id: CurrentLearner,
                 clock: ClockDep) -> ReviewQueueOut:
    """Your cards due now (most overdue first, at most 50), with FSRS's predicted recall.
    Answer one with POST /api/v1/questions/{slug}/attempts."""
    now = clock.now()
    due = review.due_cards(db_session=db_session, learner_id=learner_id, now=now)
    scheduler = review.scheduler_for(db_session=db_session, learner_id=learner_id)
    return ReviewQueueOut(
        due_count=review.due_count(db_session=db_session, learner_id=learner_id, now=now),
        cards=[_card_out(db_session, learner_id, d, now, scheduler) for d in due],
        next_due=None if due else review.next_due(db_session=db_session, learner_id=learner_id,
                                                  now=now))


def _fit_out(fit: ScheduleFit | None) -> FitOut | None:
    if fit is None:
        return None
    return FitOut.model_validate(fit, from_attributes=True)


def _schedule_out(status: review.ScheduleStatus) -> ScheduleOut:
    return ScheduleOut(
        desired_retention=status.retention, own_parameters=status.own,
        parameters=list(status.parameters or DEFAULT_PARAMETERS), fitted_at=status.fitted_at,
        fitted_reviews=status.fitted_reviews, fitted_loss=status.fitted_loss,
        default_loss=status.default_loss, optimal_retention=status.optimal_retention,
        eligible_reviews=status.eligible or 0, reviews_needed=status.needed,
        pending_fit=_fit_out(status.pending), last_fit=_fit_out(status.last),
        workload=[WorkloadOut(retention=w.retention, per_day=w.per_day, total=w.total)
                  for w in status.workload])


@router.get("/review/schedule", response_model=ScheduleOut)
def get_schedule(db_session: SessionDep, learner_id: CurrentLearner, clock: ClockDep) -> ScheduleOut:
    """Your FSRS schedule: the weights in use (yours once fitted, else the defaults), your desired
    retention, the fits, and the reviews per day each retention costs over the next 30 days."""
    return _schedule_out(review.schedule_status(db_session=db_session, learner_id=learner_id,
                                                now=clock.now()))


@router.put("/review/schedule", response_model=ScheduleOut, responses={422: {}})
def put_retention(body: RetentionIn, db_session: SessionDep, learner_id: CurrentLearner,
                  clock: ClockDep) -> ScheduleOut:
    """Set your desired retention (0.70 to 0.97); every card's due date moves to it."""
    review.set_retention(db_session=db_session, learner_id=learner_id,
                         retention=body.desired_retention, now=clock.now())
    return _schedule_out(review.schedule_status(db_session=db_session, learner_id=learner_id,
                                                now=clock.now()))


@router.post("/review/schedule/fit", response_model=FitOut, status_code=202,
             responses={422: {}, 429: {}})
def post_fit(db_session: SessionDep, learner_id: CurrentLearner, clock: ClockDep) -> FitOut:
    """Queue a fit of your own FSRS weights from your review log (a worker runs it in the
    background; GET /api/v1/review/schedule shows it). Needs 512 reviews that count."""
    fit = review.request_fit(db_session=db_session, learner_id=learner_id, now=clock.now())
    out = _fit_out(fit)
    assert out is not None
    return out
