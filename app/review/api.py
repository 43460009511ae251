"""The review-queue API (/api/v1): the learner's due cards."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter
from sqlalchemy.orm import Session

from app.deps import API_BUSY, ClockDep, CurrentLearner, SessionDep
from app.questions.models import Question
from app.questions.service import revision_doc, revision_variant
from app.quizzes.service import drawn_variant
from app.review import service as review
from app.review.schemas import DueCardOut, ReviewQueueOut


def _asked(db_session: Session, learner_id: str, question: Question) -> tuple[int, str]:
    """The variant a due card is reviewed with, and its prompt."""
    assert question.current_revision is not None
    count = revision_doc(question.current_revision).variant_count
    variant = drawn_variant(db_session=db_session, learner_id=learner_id, question_id=question.id,
                            count=count)
    return variant, revision_variant(revision=question.current_revision, variant=variant).prompt


def _card_out(db_session: Session, learner_id: str, due: review.DueCard, now: datetime) -> DueCardOut:
    variant, prompt = _asked(db_session, learner_id, due.question)
    return DueCardOut(slug=due.question.slug, title=due.question.title, topic=due.question.topic,
                      due=due.card.due, reps=due.card.reps,
                      retrievability=review.retrievability(card=due.card, at=now),
                      variant=variant, prompt=prompt)

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
        cards=[_card_out(db_session, learner_id, d, now) for d in due],
        next_due=None if due else review.next_due(db_session=db_session, learner_id=learner_id,
                                                  now=now))
