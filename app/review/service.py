"""Spaced review with FSRS: one card per learner and question, the rating of an answer, the
queue of due cards, and a card's predicted recall at any date.

Every function that depends on the time takes `now` (or `at`): the caller reads it from the
one clock (app/clock.py), so tests and the readiness forecast choose the moment.
The rating mapping is documented in docs/review.md; `rating_for` is the whole of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any, Protocol

from fsrs import Card, Rating, Scheduler
from fsrs import ReviewLog as FsrsReviewLog
from fsrs.scheduler import DEFAULT_PARAMETERS
from sqlalchemy import Connection, bindparam, exists, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app import leases, ratelimit
from app.accounts.service import ensure_learner
from app.db import utcnow
from app.errors import InvalidInput
from app.questions.models import STATUS_PUBLISHED, Question
from app.review import fitting
from app.review.models import (
    FIT_ASKED,
    FIT_QUEUED,
    FIT_WEEKLY,
    OUTCOME_FITTED,
    OUTCOME_NO_BETTER,
    OUTCOME_TOO_FEW,
    LearnerSchedule,
    ReviewCard,
    ReviewLog,
    ScheduleFit,
)

DEFAULT_RETENTION = 0.9
# FSRS-6 with its default weights and 90% desired retention: every learner's scheduler until
# they choose another retention or have their own weights fitted (scheduler_for). Fuzzing is
# off: a learner has tens of cards, not thousands, so spreading due dates buys nothing, and
# an unfuzzed schedule is exactly reproducible (tests, and the readiness forecast built on it).
SCHEDULER = Scheduler(desired_retention=DEFAULT_RETENTION, enable_fuzzing=False)

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
# with bound parameters: through the ORM (load the card, change it, flush it with a new
# log row) most of scheduling's time went to building statements and their cache keys.
# The columns' types still apply (JSON, UTC datetimes), so both databases store exactly
# what the ORM would.
_CARD_OF = (select(ReviewCard.id, ReviewCard.card)
            .where(ReviewCard.learner_id == bindparam("learner_id"),
                   ReviewCard.question_id == bindparam("question_id")))
_NEW_CARD = insert(ReviewCard).returning(ReviewCard.id)
_RESCHEDULE = (update(ReviewCard).where(ReviewCard.id == bindparam("card_id"))
               .values(card=bindparam("new_card"), due=bindparam("new_due"),
                       reps=ReviewCard.reps + 1, last_review=bindparam("reviewed"),
                       last_rating=bindparam("rating")))
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


@lru_cache(maxsize=512)
def _scheduler(parameters: tuple[float, ...] | None, retention: float) -> Scheduler:
    if parameters is None and retention == DEFAULT_RETENTION:
        return SCHEDULER
    return Scheduler(parameters=parameters or DEFAULT_PARAMETERS, desired_retention=retention,
                     enable_fuzzing=False)


def make_scheduler(*, parameters: Sequence[float] | None, retention: float) -> Scheduler:
    """The unfuzzed FSRS scheduler with these weights (None: the defaults) and retention."""
    return _scheduler(tuple(float(p) for p in parameters) if parameters else None,
                      float(retention))


_SCHEDULE_OF = (select(LearnerSchedule.parameters, LearnerSchedule.desired_retention)
                .where(LearnerSchedule.learner_id == bindparam("learner_id")))


def _scheduler_of(conn: Connection, learner_id: str) -> Scheduler:
    row = conn.execute(_SCHEDULE_OF, {"learner_id": learner_id}).first()
    if row is None:
        return SCHEDULER
    return make_scheduler(parameters=row.parameters, retention=row.desired_retention)


def scheduler_for(*, db_session: Session, learner_id: str) -> Scheduler:
    """The learner's scheduler: their own fitted weights (else the defaults) at their desired
    retention (else 90%). Every schedule, recall and forecast of the learner uses it."""
    return _scheduler_of(db_session.connection(), learner_id)


class Answer(Protocol):
    """What scheduling reads of a stored answer (app.quizzes.models.Attempt is one)."""

    @property
    def id(self) -> int: ...
    @property
    def learner_id(self) -> str: ...
    @property
    def question_id(self) -> int: ...
    @property
    def score(self) -> float: ...
    @property
    def correct(self) -> bool: ...
    @property
    def time_taken_ms(self) -> int | None: ...


def record_review(*, db_session: Session, attempt: Answer, confidence: str | None,
                  now: datetime) -> int:
    """Schedule the learner's card for the attempt's question (made on first answer) and log
    it; returns the card's id."""
    # Asked once: each Session.connection() walks the session's transaction state.
    conn = db_session.connection()
    card_id, state = _card_of(db_session, conn, attempt.learner_id, attempt.question_id, now)
    rating = rating_for(score=attempt.score, correct=attempt.correct, confidence=confidence,
                        time_taken_ms=attempt.time_taken_ms)
    scheduler = _scheduler_of(conn, attempt.learner_id)
    card, log = scheduler.review_card(state, rating, review_datetime=now,
                                      review_duration=attempt.time_taken_ms)
    conn.execute(_RESCHEDULE, {"card_id": card_id, "new_card": dict(card.to_dict()),
                               "new_due": card.due, "reviewed": now, "rating": int(rating)})
    conn.execute(_LOG, {"card_id": card_id, "learner_id": attempt.learner_id,
                        "attempt_id": attempt.id, "rating": int(rating), "reviewed_at": now,
                        "log": dict(log.to_dict())})
    # A card this session loaded before (a page showing it after the answer) would
    # otherwise keep its old schedule: these writes bypass the session's identity map.
    if (loaded := db_session.identity_map.get(db_session.identity_key(ReviewCard, card_id))):
        db_session.expire(loaded)
    return card_id


def retrievability(*, card: ReviewCard, at: datetime, scheduler: Scheduler = SCHEDULER) -> float:
    """FSRS's predicted probability (0..1) that the learner recalls the card at `at` (with the
    learner's scheduler: scheduler_for)."""
    if card.last_review is None:
        return 0.0
    return float(scheduler.get_card_retrievability(fsrs_card(card), at))


def retrievability_by_question(*, db_session: Session, learner_id: str,
                               at: datetime) -> dict[int, float]:
    """Predicted recall at `at` for every question the learner has a card for."""
    scheduler = scheduler_for(db_session=db_session, learner_id=learner_id)
    cards = db_session.scalars(select(ReviewCard).where(ReviewCard.learner_id == learner_id))
    return {c.question_id: retrievability(card=c, at=at, scheduler=scheduler) for c in cards}


# The one definition of the learning loop's three numbers. Every page, the header's badge,
# the plan and the API read them from here (tests/progress/test_numbers_agree.py):
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
    # The learner's own scheduler (their fitted weights and retention: scheduler_for).
    scheduler: Scheduler = field(default_factory=lambda: SCHEDULER)

    def recall(self, at: datetime) -> float:
        """FSRS's predicted recall at `at`, by the learner's scheduler."""
        if self.fsrs is None:
            return 0.0
        return float(self.scheduler.get_card_retrievability(self.fsrs, at))

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
    # Columns, not ORM objects: the dashboard reads hundreds of cards on every visit.
    rows = db_session.execute(select(ReviewCard.question_id, ReviewCard.due, ReviewCard.card,
                                     ReviewCard.last_review, ReviewCard.last_rating)
                              .where(ReviewCard.learner_id == learner_id))
    scheduler = scheduler_for(db_session=db_session, learner_id=learner_id)
    return [CardState(qid, due, Card.from_dict(card) if card and reviewed is not None else None,
                      rating, scheduler)
            for qid, due, card, reviewed, rating in rows]


def due_before(*, db_session: Session, learner_id: str, at: datetime) -> dict[int, datetime | None]:
    """For each card the learner has reviewed since `at`, by question id: when it was due as
    it stood at `at` (its reviews before then replayed by the learner's scheduler), or None
    for a card first reviewed since then. What the day looked like at its start, so a goal
    counted from it stays put while the learner works through it."""
    reviewed: dict[int, int] = {cid: qid for cid, qid in db_session.execute(
        select(ReviewCard.id, ReviewCard.question_id)
        .where(ReviewCard.learner_id == learner_id, ReviewCard.last_review >= at))}
    if not reviewed:
        return {}
    scheduler = scheduler_for(db_session=db_session, learner_id=learner_id)
    logs: dict[int, list[tuple[datetime, int]]] = {cid: [] for cid in reviewed}
    for cid, when, rating in db_session.execute(
            select(ReviewLog.card_id, ReviewLog.reviewed_at, ReviewLog.rating)
            .where(ReviewLog.card_id.in_(list(reviewed)), ReviewLog.reviewed_at < at)
            .order_by(ReviewLog.card_id, ReviewLog.reviewed_at, ReviewLog.id)):
        logs[cid].append((_utc(when), rating))
    out: dict[int, datetime | None] = {}
    for cid, qid in reviewed.items():
        if not logs[cid]:
            out[qid] = None
            continue
        card = Card(card_id=cid, due=logs[cid][0][0])
        for when, rating in logs[cid]:
            card, _ = scheduler.review_card(card, Rating(rating), review_datetime=when)
        out[qid] = _utc(card.due)
    return out


# The learner's own schedule: desired retention, fitted weights, and the fits that make them --

# A fit is queued again for a learner this long after their last one (if they reviewed since).
REFIT_EVERY = timedelta(days=7)
# Fits a learner may ask for per day with the button (a fit costs seconds of a worker's CPU).
FITS_PER_DAY = 5
# An infrastructure failure (the fitting process died) is retried this many times in all.
MAX_FIT_ATTEMPTS = 3
# The workload shown beside the retention choice covers this many days.
WORKLOAD_DAYS = 30


class RetentionError(InvalidInput):
    """A desired retention outside the range the scheduler is offered."""


def get_schedule(*, db_session: Session, learner_id: str) -> LearnerSchedule | None:
    """The learner's stored schedule (retention, fitted weights), if they have one."""
    return db_session.get(LearnerSchedule, learner_id)


def _schedule_row(db_session: Session, learner_id: str) -> LearnerSchedule:
    row = db_session.get(LearnerSchedule, learner_id)
    if row is None:
        ensure_learner(db_session=db_session, learner_id=learner_id)
        row = LearnerSchedule(learner_id=learner_id, desired_retention=DEFAULT_RETENTION)
        db_session.add(row)
        db_session.flush()
    return row


def learner_reviews(*, db_session: Session, learner_id: str) -> list[fitting.Review]:
    """The learner's review log as the fit reads it: card, rating, time and duration."""
    rows = db_session.execute(
        select(ReviewLog.card_id, ReviewLog.rating, ReviewLog.reviewed_at, ReviewLog.log)
        .where(ReviewLog.learner_id == learner_id).order_by(ReviewLog.reviewed_at, ReviewLog.id))
    return [fitting.Review(card_id, rating, _utc(at), (log or {}).get("review_duration"))
            for card_id, rating, at, log in rows]


def _utc(at: datetime) -> datetime:
    # PostgreSQL hands times back in the session's zone (tzinfo Etc/UTC, say); the fsrs
    # package accepts only datetime.timezone.utc itself.
    return at.astimezone(UTC)


def reschedule_cards(*, db_session: Session, learner_id: str, scheduler: Scheduler) -> int:
    """Replay every card's review log with `scheduler` (the package's reschedule_card), so each
    card's state and due date are what these weights and this retention give; how many."""
    cards_stmt = select(ReviewCard.id, ReviewCard.due).where(ReviewCard.learner_id == learner_id)
    if db_session.get_bind().dialect.name == "postgresql":
        # An answer being scheduled meanwhile waits, rather than writing over the replay.
        cards_stmt = cards_stmt.with_for_update()
    cards = dict(db_session.execute(cards_stmt).all())
    logs: dict[int, list[FsrsReviewLog]] = {}
    # The log's own card id is not used: a card merged from another identity's
    # (app.learners.service.move_history) keeps its older card id in the JSON.
    for card_id, rating, at in db_session.execute(
            select(ReviewLog.card_id, ReviewLog.rating, ReviewLog.reviewed_at)
            .where(ReviewLog.card_id.in_(list(cards)))
            .order_by(ReviewLog.reviewed_at, ReviewLog.id)):
        logs.setdefault(card_id, []).append(FsrsReviewLog(card_id, Rating(rating), _utc(at), None))
    rows = []
    for card_id, due in cards.items():
        if not logs.get(card_id):
            continue
        card = scheduler.reschedule_card(Card(card_id=card_id, due=_utc(due)), logs[card_id])
        rows.append({"card_id": card_id, "new_card": dict(card.to_dict()), "new_due": card.due})
    if rows:
        db_session.connection().execute(
            update(ReviewCard).where(ReviewCard.id == bindparam("card_id"))
            .values(card=bindparam("new_card"), due=bindparam("new_due")), rows)
        db_session.expire_all()
    return len(rows)


def set_retention(*, db_session: Session, learner_id: str, retention: float,
                  now: datetime) -> LearnerSchedule:
    """Store the learner's desired retention and move every card's due date to it."""
    if not fitting.MIN_RETENTION <= retention <= fitting.MAX_RETENTION:
        raise RetentionError(f"Choose a desired retention between {fitting.MIN_RETENTION:.0%} and "
                             f"{fitting.MAX_RETENTION:.0%}.", loc=("desired_retention",))
    row = _schedule_row(db_session, learner_id)
    row.desired_retention = round(float(retention), 4)
    row.updated_at = now
    db_session.flush()
    reschedule_cards(db_session=db_session, learner_id=learner_id,
                     scheduler=make_scheduler(parameters=row.parameters,
                                              retention=row.desired_retention))
    return row


def pending_fit(*, db_session: Session, learner_id: str) -> ScheduleFit | None:
    """The learner's fit waiting for or held by a worker, if any."""
    return db_session.scalar(select(ScheduleFit).where(ScheduleFit.learner_id == learner_id,
                                                       ScheduleFit.pending.is_(True)))


def last_fit(*, db_session: Session, learner_id: str) -> ScheduleFit | None:
    """The learner's most recently finished (or failed) fit."""
    return db_session.scalar(select(ScheduleFit).where(ScheduleFit.learner_id == learner_id,
                                                       ScheduleFit.pending.is_(None))
                             .order_by(ScheduleFit.requested_at.desc(), ScheduleFit.id.desc())
                             .limit(1))


def _queue_fit(db_session: Session, learner_id: str, reason: str, now: datetime) -> ScheduleFit:
    existing = pending_fit(db_session=db_session, learner_id=learner_id)
    if existing is not None:
        return existing
    fit = ScheduleFit(learner_id=learner_id, reason=reason, status=FIT_QUEUED, pending=True,
                      requested_at=now)
    try:
        with db_session.begin_nested():
            db_session.add(fit)
            db_session.flush()
    except IntegrityError:
        # The learner's other tab (or a weekly sweep) queued one a moment ago: that one it is.
        winner = pending_fit(db_session=db_session, learner_id=learner_id)
        if winner is None:
            raise
        return winner
    return fit


def request_fit(*, db_session: Session, learner_id: str, now: datetime) -> ScheduleFit:
    """Queue a fit of the learner's own weights (the button), or return the one waiting.
    Raises InvalidInput with too few reviews to fit, RateLimited past FITS_PER_DAY."""
    existing = pending_fit(db_session=db_session, learner_id=learner_id)
    if existing is not None:
        return existing
    have = fitting.eligible_reviews(learner_reviews(db_session=db_session, learner_id=learner_id))
    if have < fitting.MIN_FIT_REVIEWS:
        raise InvalidInput(f"A fit needs {fitting.MIN_FIT_REVIEWS} reviews a day or more after the "
                           f"card's previous one; you have {have}.")
    ratelimit.hit(db_session=db_session, bucket="fsrs-fit", key=learner_id, limit=FITS_PER_DAY,
                  window_s=86400, now=now,
                  message=f"You have asked for {FITS_PER_DAY} fits today; the weekly refit "
                          "will pick up your new reviews.")
    return _queue_fit(db_session, learner_id, FIT_ASKED, now)


def queue_weekly_refits(*, db_session: Session, now: datetime, limit: int = 100) -> int:
    """Queue a fit for every learner with enough reviews whose last fit (if any) is older than
    REFIT_EVERY and who has reviewed since; how many were queued."""
    recent = exists().where(ScheduleFit.learner_id == ReviewLog.learner_id,
                            ScheduleFit.requested_at > now - REFIT_EVERY)
    fitted = select(LearnerSchedule.fitted_at).where(
        LearnerSchedule.learner_id == ReviewLog.learner_id).scalar_subquery()
    # The raw count is a cheap bound on the reviews the fit can learn from: the fit itself
    # counts those and records "too few" (which also waits a week) when they fall short.
    stmt = (select(ReviewLog.learner_id).where(~recent)
            .group_by(ReviewLog.learner_id)
            .having(func.count() >= fitting.MIN_FIT_REVIEWS,
                    or_(func.max(fitted).is_(None), func.max(ReviewLog.reviewed_at) > func.max(fitted)))
            .limit(limit))
    learners = list(db_session.scalars(stmt))
    for learner_id in learners:
        _queue_fit(db_session, learner_id, FIT_WEEKLY, now)
    return len(learners)


def has_claimable_fit(*, db_session: Session) -> bool:
    """True when some fit waits for a worker (a read: no lock is taken)."""
    return db_session.scalar(select(ScheduleFit.id)
                             .where(leases.claimable(ScheduleFit, utcnow())).limit(1)) is not None


def claim_fit(*, db_session: Session, worker_id: str, lease_seconds: float) -> ScheduleFit | None:
    """Take the oldest queued fit (or one whose lease ran out) and lease it to this worker."""
    fit: ScheduleFit | None = leases.claim(
        db_session=db_session, job=ScheduleFit, worker_id=worker_id, lease_seconds=lease_seconds,
        order_by=(ScheduleFit.requested_at, ScheduleFit.id))
    return fit


def renew_fit_lease(*, db_session: Session, fit_id: int, worker_id: str, lease_seconds: float) -> bool:
    """Extend this worker's lease on the fit; False if it is no longer this worker's."""
    return leases.renew(db_session=db_session, job=ScheduleFit, job_id=fit_id,
                        worker_id=worker_id, lease_seconds=lease_seconds)


def complete_fit(*, db_session: Session, fit_id: int, worker_id: str, result: fitting.FitResult,
                 now: datetime) -> bool:
    """Store a finished fit: the learner's weights (when the fit beat the defaults) with every
    card rescheduled by them, and the fit marked done; False if the lease was lost."""
    fit = db_session.get(ScheduleFit, fit_id)
    if fit is None:
        return False
    params = result.parameters
    if params is not None and (len(params) != len(DEFAULT_PARAMETERS)
                               or not all(isinstance(p, float) and p == p for p in params)):
        raise ValueError("a fit returned something that is not 21 FSRS weights")
    if result.eligible < fitting.MIN_FIT_REVIEWS:
        outcome = OUTCOME_TOO_FEW
    else:
        outcome = OUTCOME_FITTED if params is not None else OUTCOME_NO_BETTER
    if not leases.finish(db_session=db_session, job=ScheduleFit, job_id=fit_id,
                         worker_id=worker_id, pending=None, outcome=outcome,
                         reviews=result.reviews, eligible=result.eligible, seconds=result.seconds,
                         finished_at=now, failure_reason="; ".join(result.notes)[:2000] or None):
        return False
    if outcome == OUTCOME_TOO_FEW:
        return True
    row = _schedule_row(db_session, fit.learner_id)
    row.fitted_reviews, row.fitted_at = result.reviews, now
    row.fitted_loss, row.default_loss = result.fitted_loss, result.default_loss
    row.optimal_retention = result.optimal_retention
    row.parameters = params
    row.updated_at = now
    db_session.flush()
    reschedule_cards(db_session=db_session, learner_id=fit.learner_id,
                     scheduler=make_scheduler(parameters=params, retention=row.desired_retention))
    return True


def fail_fit(*, db_session: Session, fit_id: int, worker_id: str, reason: str) -> str | None:
    """The fit could not run (its process died, it ran out of time): queue it again, or fail it
    after MAX_FIT_ATTEMPTS. The learner's schedule is untouched either way."""
    return leases.fail(db_session=db_session, job=ScheduleFit, job_id=fit_id,
                       worker_id=worker_id, reason=reason, max_attempts=MAX_FIT_ATTEMPTS,
                       final={"pending": (None, True)})


def release_fit(*, db_session: Session, fit_id: int, worker_id: str) -> None:
    """Give a claimed fit back without counting an attempt (a worker shutting down)."""
    leases.release(db_session=db_session, job=ScheduleFit, job_id=fit_id, worker_id=worker_id)


@dataclass
class ScheduleStatus:
    """What the learner is told about their schedule."""

    retention: float
    parameters: list[float] | None  # None: the defaults
    fitted_at: datetime | None
    fitted_reviews: int | None
    fitted_loss: float | None
    default_loss: float | None
    optimal_retention: float | None
    eligible: int | None  # reviews a fit would learn from now (None: not counted)
    needed: int
    pending: ScheduleFit | None
    last: ScheduleFit | None
    workload: list[fitting.Workload]

    @property
    def own(self) -> bool:
        return self.parameters is not None

    @property
    def can_fit(self) -> bool:
        return self.eligible is not None and self.eligible >= self.needed

    @property
    def full(self) -> bool:
        return self.eligible is not None


def schedule_status(*, db_session: Session, learner_id: str, now: datetime,
                    full: bool = True) -> ScheduleStatus:
    """The learner's retention and parameters; and (full) how many reviews a fit would learn
    from, the fits, and the reviews per day each retention would cost them over the next
    WORKLOAD_DAYS days, simulated from their cards with their parameters."""
    row = get_schedule(db_session=db_session, learner_id=learner_id)
    retention = row.desired_retention if row else DEFAULT_RETENTION
    params = row.parameters if row else None
    if not full:
        return ScheduleStatus(
            retention=retention, parameters=params, fitted_at=row.fitted_at if row else None,
            fitted_reviews=row.fitted_reviews if row else None, fitted_loss=None,
            default_loss=None, optimal_retention=None, eligible=None,
            needed=fitting.MIN_FIT_REVIEWS, pending=None, last=None, workload=[])
    reviews = learner_reviews(db_session=db_session, learner_id=learner_id)
    retentions = sorted({*fitting.RETENTION_CHOICES, retention})
    loads = fitting.workload(
        _live_cards(db_session, learner_id), parameters=params or DEFAULT_PARAMETERS,
        retentions=retentions, start=now, days=WORKLOAD_DAYS)
    return ScheduleStatus(
        retention=retention, parameters=params, fitted_at=row.fitted_at if row else None,
        fitted_reviews=row.fitted_reviews if row else None,
        fitted_loss=row.fitted_loss if row else None, default_loss=row.default_loss if row else None,
        optimal_retention=row.optimal_retention if row else None,
        eligible=fitting.eligible_reviews(reviews), needed=fitting.MIN_FIT_REVIEWS,
        pending=pending_fit(db_session=db_session, learner_id=learner_id),
        last=last_fit(db_session=db_session, learner_id=learner_id), workload=loads)


def _live_cards(db_session: Session, learner_id: str) -> list[Card]:
    """The learner's reviewed cards of published questions, as the package's Cards."""
    rows = db_session.execute(
        select(ReviewCard.card).join(Question, Question.id == ReviewCard.question_id)
        .where(ReviewCard.learner_id == learner_id, ReviewCard.last_review.is_not(None),
               Question.status == STATUS_PUBLISHED))
    return [Card.from_dict(state) for (state,) in rows if state]
