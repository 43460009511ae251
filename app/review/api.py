"""The review-queue API (/api/v1): the learner's due cards."""

from __future__ import annotations

from fastapi import APIRouter

from app.deps import API_BUSY, ClockDep, CurrentLearner, SessionDep
from app.review import service as review
from app.review.schemas import DueCardOut, ReviewQueueOut

router = APIRouter(prefix="/api/v1", tags=["review"], responses=API_BUSY)


@router.get("/review/queue", response_model=ReviewQueueOut)
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
