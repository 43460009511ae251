"""Spaced review with FSRS: one card per learner and question, the rating of an answer, the
queue of due cards, and a card's predicted recall at any date.

Every function that depends on the time takes `now` (or `at`): the caller reads it from the
one clock (app/clock.py), so tests and the readiness forecast choose the moment.
The rating mapping is documented in docs/review.md; `rating_for` is the whole of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from fsrs import Card, Rating, Scheduler
from sqlalchemy import Connection, bindparam, func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.questions.models import STATUS_PUBLISHED, Question
from app.quizzes.models import Attempt
from app.review.models import ReviewCard, ReviewLog

# FSRS-6 with its default weights and 90% desired retention. Fuzzing is off: a learner has
# tens of cards, not thousands, so spreading due dates buys nothing, and an unfuzzed
# schedule is exactly reproducible (tests, and the readiness forecast built on it).
SCHEDULER = Scheduler(desired_retention=0.9, enable_fuzzing=False)

# Correct and "sure" within this many milliseconds is effortless recall: Easy.
FAST_MS = 20_000
# Correct but slower than this (with no confidence given) was hard-won: Hard.
SLOW_MS = 120_000
# A score at or above this (and below 1) is "partly right" (multi-select partial credit).
PARTIAL_SCORE = 0.5
# The Review page and API show at most this many due cards at once.
QUEUE_LIMIT = 50


def rating_for(*, score: float, correct: bool, confidence: str | None,
               time_taken_ms: int | None) -> Rating:
    """The FSRS rating of one answer (docs/review.md has the table)."""
    if not correct:
        if score >= PARTIAL_SCORE and confidence != "guessing":
            return Rating.Hard
        return Rating.Again
    if confidence == "guessing":
        # A right guess is not recall: see it again soon.
        return Rating.Again
    if confidence == "unsure":
        return Rating.Hard
    if confidence == "sure":
        if time_taken_ms is not None and time_taken_ms <= FAST_MS:
            return Rating.Easy
        return Rating.Good
    if time_taken_ms is not None and time_taken_ms > SLOW_MS:
        return Rating.Hard
    return Rating.Good


def fsrs_card(card: ReviewCard) -> Card:
    """The stored card as the `fsrs` package's Card."""
    if not card.card:
        return Card(card_id=card.id, due=card.due)
    return Card.from_dict(card.card)  # type: ignore[arg-type]


# Every answer schedules a card, so these statements are built once, as SQLAlchemy Core
# with bound parameters. Through the ORM (load the card, change it, flush it with a new
# log row) scheduling cost ~1 ms of Python per answer on the build machine, most of it
# building statements and their cache keys; the same writes as prebuilt Core statements
# cost a fifth of that (docs/performance.md). The columns' types still apply (JSON,
# UTC datetimes), so both databases store exactly what the ORM would.
_CARD_OF = (select(ReviewCard.id, ReviewCard.card)
            .where(ReviewCard.learner_id == bindparam("learner_id"),
                   ReviewCard.question_id == bindparam("question_id")))
_NEW_CARD = insert(ReviewCard).returning(ReviewCard.id)
_RESCHEDULE = (update(ReviewCard).where(ReviewCard.id == bindparam("card_id"))
               .values(card=bindparam("new_card"), due=bindparam("new_due"),
                       reps=ReviewCard.reps + 1, last_review=bindparam("reviewed")))
_LOG = insert(ReviewLog)


def _card_of(db_session: Session, conn: Connection, learner_id: str, question_id: int,
             now: datetime) -> tuple[int, Card]:
    """The id and FSRS state of the learner's card for the question, made on first answer."""
    row = conn.execute(_CARD_OF, {"learner_id": learner_id, "question_id": question_id}).first()
    if row is None:
        try:
            with db_session.begin_nested():
                card_id = conn.execute(_NEW_CARD, {"learner_id": learner_id,
                                                   "question_id": question_id, "card": {},
                                                   "due": now, "reps": 0}).scalar_one()
            return card_id, Card(card_id=card_id, due=now)
        except IntegrityError:
            # The learner's other tab made the card a moment ago; review that one.
            row = conn.execute(_CARD_OF, {"learner_id": learner_id,
                                          "question_id": question_id}).one()
    card_id, state = row
    return card_id, (Card.from_dict(state) if state else Card(card_id=card_id, due=now))


def record_review(*, db_session: Session, attempt: Attempt, confidence: str | None,
                  now: datetime) -> int:
    """Schedule the learner's card for the attempt's question (made on first answer) and log
    it; returns the card's id."""
    # Asked once: each Session.connection() walks the session's transaction state (~40 µs).
    conn = db_session.connection()
    card_id, state = _card_of(db_session, conn, attempt.learner_id, attempt.question_id, now)
    rating = rating_for(score=attempt.score, correct=attempt.correct, confidence=confidence,
                        time_taken_ms=attempt.time_taken_ms)
    card, log = SCHEDULER.review_card(state, rating, review_datetime=now,
                                      review_duration=attempt.time_taken_ms)
    conn.execute(_RESCHEDULE, {"card_id": card_id, "new_card": dict(card.to_dict()),
                               "new_due": card.due, "reviewed": now})
    conn.execute(_LOG, {"card_id": card_id, "learner_id": attempt.learner_id,
                        "attempt_id": attempt.id, "rating": int(rating), "reviewed_at": now,
                        "log": dict(log.to_dict())})
    # A card this session loaded before (a page showing it after the answer) would
    # otherwise keep its old schedule: these writes bypass the session's identity map.
    if (loaded := db_session.identity_map.get(db_session.identity_key(ReviewCard, card_id))):
        db_session.expire(loaded)
    return card_id


def retrievability(*, card: ReviewCard, at: datetime) -> float:
    """FSRS's predicted probability (0..1) that the learner recalls the card at `at`."""
    if card.last_review is None:
        return 0.0
    return float(SCHEDULER.get_card_retrievability(fsrs_card(card), at))


def retrievability_by_question(*, db_session: Session, learner_id: str,
                               at: datetime) -> dict[int, float]:
    """Predicted recall at `at` for every question the learner has a card for."""
    cards = db_session.scalars(select(ReviewCard).where(ReviewCard.learner_id == learner_id))
    return {c.question_id: retrievability(card=c, at=at) for c in cards}


# The one definition of the learning loop's three numbers. Every page, the header's badge,
# the plan and the API read them from here (tests/learning/test_numbers_agree.py):
# - due: a card is due once its due time has come, `due <= now`; the Review page serves
#   exactly these cards, and a card falling due later today is not due yet;
# - recall: FSRS's predicted probability of remembering the card at a moment;
# - mastery of a question: its recall, if the card's last review recalled it (any rating but
#   Again), else 0; a topic's mastery is the mean over its published questions, unseen ones
#   counting 0. Right after a wrong answer FSRS's recall is still near 1 (the card was just
#   seen), so recall alone would call a topic answered 2 out of 5 mastered.


def is_due(*, due: datetime, now: datetime) -> bool:
    """A card is due once its due time has come."""
    return due <= now


def _due_where(learner_id: str, now: datetime) -> tuple[Any, ...]:
    # Retired (or unpublished) questions leave the queue; their cards stay for the record.
    return (ReviewCard.learner_id == learner_id, ReviewCard.due <= now,
            Question.status == STATUS_PUBLISHED)


def _due_query(learner_id: str, now: datetime) -> Any:
    return (select(ReviewCard, Question)
            .join(Question, Question.id == ReviewCard.question_id)
            .where(*_due_where(learner_id, now)))


@dataclass
class DueCard:
    card: ReviewCard
    question: Question


def due_cards(*, db_session: Session, learner_id: str, now: datetime,
              limit: int = QUEUE_LIMIT) -> list[DueCard]:
    """The learner's cards due at `now`, most overdue first, of published questions only."""
    rows = db_session.execute(_due_query(learner_id, now)
                              .order_by(ReviewCard.due, ReviewCard.id).limit(limit))
    return [DueCard(card, question) for card, question in rows]


def due_count(*, db_session: Session, learner_id: str, now: datetime) -> int:
    """How many of the learner's cards are due at `now` (published questions only)."""
    stmt = (select(func.count()).select_from(ReviewCard)
            .join(Question, Question.id == ReviewCard.question_id)
            .where(*_due_where(learner_id, now)))
    return int(db_session.scalar(stmt) or 0)


def next_due(*, db_session: Session, learner_id: str, now: datetime) -> datetime | None:
    """When the learner's next card (of a published question) falls due after `now`."""
    stmt = (select(ReviewCard.due)
            .join(Question, Question.id == ReviewCard.question_id)
            .where(ReviewCard.learner_id == learner_id, ReviewCard.due > now,
                   Question.status == STATUS_PUBLISHED)
            .order_by(ReviewCard.due).limit(1))
    return db_session.scalar(stmt)


def card_due(*, db_session: Session, learner_id: str, question_id: int) -> datetime | None:
    """When the learner's card for this question comes back (None if there is no card)."""
    return db_session.scalar(select(ReviewCard.due).where(ReviewCard.learner_id == learner_id,
                                                          ReviewCard.question_id == question_id))


def due_per_day(*, db_session: Session, learner_id: str, start: datetime,
                days: int) -> list[int]:
    """How many cards (of published questions) fall due on each of `days` days from `start`:
    the first day counts everything already overdue too."""
    stmt = (select(ReviewCard.due).join(Question, Question.id == ReviewCard.question_id)
            .where(ReviewCard.learner_id == learner_id, Question.status == STATUS_PUBLISHED,
                   ReviewCard.due < start + timedelta(days=days)))
    counts = [0] * days
    for due in db_session.scalars(stmt):
        counts[max(0, (due - start) // timedelta(days=1))] += 1
    return counts


@dataclass
class CardState:
    """A card's question, due time, FSRS state (None if never reviewed) and last rating."""

    question_id: int
    due: datetime
    fsrs: Card | None
    last_rating: int | None

    def recall(self, at: datetime) -> float:
        """FSRS's predicted recall at `at`."""
        if self.fsrs is None:
            return 0.0
        return float(SCHEDULER.get_card_retrievability(self.fsrs, at))

    @property
    def recalled_last(self) -> bool:
        """The last review recalled it (wrong answers and right guesses are rated Again); a
        card with no review log to say otherwise counts as recalled."""
        return self.last_rating != int(Rating.Again)

    def mastery(self, at: datetime) -> float:
        """What the question adds to its topic's mastery at `at` (the rule above)."""
        return self.recall(at) if self.recalled_last else 0.0

    def is_due(self, now: datetime) -> bool:
        return is_due(due=self.due, now=now)


def card_states(*, db_session: Session, learner_id: str) -> list[CardState]:
    """Every card of the learner, parsed once, with the rating of its last review."""
    # Columns, not ORM objects: the dashboard reads hundreds of cards on every visit. The
    # last rating of each card is one grouped read of the learner's logs (the newest log of
    # a card has the largest id: logs are only ever appended).
    latest = (select(func.max(ReviewLog.id)).where(ReviewLog.learner_id == learner_id)
              .group_by(ReviewLog.card_id))
    ratings = dict(db_session.execute(select(ReviewLog.card_id, ReviewLog.rating)
                                      .where(ReviewLog.id.in_(latest))).all())
    rows = db_session.execute(select(ReviewCard.id, ReviewCard.question_id, ReviewCard.due,
                                     ReviewCard.card, ReviewCard.last_review)
                              .where(ReviewCard.learner_id == learner_id))
    return [CardState(qid, due, Card.from_dict(card) if card and reviewed is not None else None,
                      ratings.get(card_id))
            for card_id, qid, due, card, reviewed in rows]


def learner_cards(*, db_session: Session, learner_id: str) -> list[ReviewCard]:
    """Every card of the learner, by question id."""
    return list(db_session.scalars(select(ReviewCard).where(ReviewCard.learner_id == learner_id)
                                   .order_by(ReviewCard.question_id)))
