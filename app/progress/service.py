"""The progress dashboard's numbers and the readiness forecast (docs/readiness.md).

Mastery of a topic is FSRS's predicted recall averaged over the topic's published questions,
an unseen question counting as 0. The forecast is the same average at the learner's interview
date; the plan simulates FSRS forward, day by day, assuming each scheduled review is recalled
(Good), and counts the reviews and new questions each day needs.

Every function takes the time (`now`) from the one clock (app/clock.py).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from fsrs import Card, Rating, Scheduler
from sqlalchemy import Date, cast, func, select
from sqlalchemy.orm import Session

from app.db import utcnow
from app.errors import InvalidInput
from app.progress.models import LearnerGoal
from app.questions.models import STATUS_PUBLISHED, Question, Topic
from app.quizzes.models import Attempt
from app.quizzes.service import ensure_learner
from app.reports import service as reports
from app.review import service as review
from app.review.models import ReviewCard

# The readiness target when the learner sets none: FSRS's own desired retention.
DEFAULT_TARGET = 0.9
# Targets outside this range are either no goal or beyond what reviewing can promise.
MIN_TARGET, MAX_TARGET = 0.5, 0.99
# The forecast is for this time of the interview day (UTC): a morning interview.
INTERVIEW_TIME = time(9, 0, tzinfo=UTC)
# A plan further ahead than this is guesswork (and a long simulation).
MAX_PLAN_DAYS = 180
WEEKS_OF_ACCURACY = 12
WEEKS_OF_HEATMAP = 18
DUE_DAYS = 7


@dataclass
class TopicMastery:
    slug: str
    title: str
    questions: int
    seen: int
    recall: float  # mean predicted recall over the topic's questions, unseen as 0


@dataclass
class WeekAccuracy:
    week: date  # the Monday
    attempts: int
    correct: int

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.attempts if self.attempts else None


@dataclass
class Dashboard:
    now: datetime
    mastery: list[TopicMastery]
    weeks: list[WeekAccuracy]
    days: dict[date, int]  # attempts per day over the heatmap's weeks
    heatmap_start: date
    due_by_day: list[tuple[date, int]]
    weakest: list[TopicMastery]
    reports: list[reports.ReportRow]
    goal: LearnerGoal | None
    forecast: Forecast | None
    total_attempts: int = 0


def _published(db_session: Session) -> tuple[dict[int, str], list[Topic]]:
    qs = dict(db_session.execute(select(Question.id, Question.topic)
                                 .where(Question.status == STATUS_PUBLISHED)).all())
    topics = list(db_session.scalars(select(Topic).where(Topic.slug.in_(set(qs.values())))
                                     .order_by(Topic.position, Topic.title)))
    return qs, topics


@dataclass
class LightCard:
    """A card's question, due date and FSRS state, parsed once (None if never reviewed)."""

    question_id: int
    due: datetime
    fsrs: Card | None
    # The learner's own scheduler (their fitted weights, if any: review.scheduler_for).
    scheduler: Scheduler = field(default_factory=lambda: review.SCHEDULER)

    def recall(self, at: datetime) -> float:
        if self.fsrs is None:
            return 0.0
        return float(self.scheduler.get_card_retrievability(self.fsrs, at))


def _cards(db_session: Session, learner_id: str) -> list[LightCard]:
    # Columns, not ORM objects: the dashboard reads hundreds of cards on every visit.
    scheduler = review.scheduler_for(db_session=db_session, learner_id=learner_id)
    rows = db_session.execute(select(ReviewCard.question_id, ReviewCard.due, ReviewCard.card,
                                     ReviewCard.last_review)
                              .where(ReviewCard.learner_id == learner_id))
    return [LightCard(qid, due, Card.from_dict(card) if card and last is not None else None,
                      scheduler)
            for qid, due, card, last in rows]


def _mastery(topics: list[Topic], questions: dict[int, str],
             recall: dict[int, float]) -> list[TopicMastery]:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for qid, topic in questions.items():
        by_topic[topic].append(qid)
    out = []
    for t in topics:
        ids = by_topic.get(t.slug, [])
        if not ids:
            continue
        out.append(TopicMastery(t.slug, t.title, len(ids), sum(1 for q in ids if q in recall),
                                sum(recall.get(q, 0.0) for q in ids) / len(ids)))
    return out


def get_goal(*, db_session: Session, learner_id: str) -> LearnerGoal | None:
    """The learner's interview date and target, if they set one."""
    return db_session.get(LearnerGoal, learner_id)


class GoalError(InvalidInput):
    """An interview date or target the forecast cannot use."""


def set_goal(*, db_session: Session, learner_id: str, interview_date: date | None,
             target: float | None, now: datetime) -> LearnerGoal:
    """Set (or with no date, clear) the learner's interview date and readiness target."""
    if interview_date is not None and interview_date < now.date():
        raise GoalError("The interview date is in the past.")
    if interview_date is not None and (interview_date - now.date()).days > MAX_PLAN_DAYS:
        raise GoalError(f"Pick a date within {MAX_PLAN_DAYS} days.")
    if target is not None and not (MIN_TARGET <= target <= MAX_TARGET):
        raise GoalError(f"The target must be between {MIN_TARGET:.0%} and {MAX_TARGET:.0%}.")
    ensure_learner(db_session=db_session, learner_id=learner_id)
    goal = db_session.get(LearnerGoal, learner_id)
    if goal is None:
        goal = LearnerGoal(learner_id=learner_id)
        db_session.add(goal)
    goal.interview_date = interview_date
    goal.target = target if target is not None else DEFAULT_TARGET
    goal.updated_at = utcnow()
    db_session.flush()
    return goal


# The readiness forecast ----------------------------------------------------------------------


@dataclass
class PlanDay:
    day: date
    reviews: int
    new: int


@dataclass
class TopicForecast:
    slug: str
    title: str
    questions: int
    seen: int
    recall: float  # predicted at the interview if the learner does nothing more
    planned: float | None  # predicted at the interview if the learner follows the plan


@dataclass
class Forecast:
    interview_date: date
    at: datetime
    target: float
    topics: list[TopicForecast]
    plan: list[PlanDay] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        return all(t.recall >= self.target for t in self.topics)

    @property
    def plan_reaches_target(self) -> bool:
        return all(t.planned is not None and t.planned >= self.target for t in self.topics)


def interview_moment(d: date) -> datetime:
    """The moment the forecast is for: 09:00 UTC on the interview date."""
    return datetime.combine(d, INTERVIEW_TIME)


def forecast(*, db_session: Session, learner_id: str, interview_date: date, target: float,
             now: datetime, cards: list[LightCard] | None = None,
             questions: dict[int, str] | None = None, topics: list[Topic] | None = None,
             with_plan: bool = True) -> Forecast:
    """Per topic, FSRS's predicted recall at the interview (unseen questions count as 0), and
    (with_plan) the day-by-day plan of reviews and new questions to bring every topic to
    `target`, which simulates FSRS forward and so costs more than the forecast itself."""
    if questions is None or topics is None:
        questions, topics = _published(db_session)
    if cards is None:
        cards = _cards(db_session, learner_id)
    at = interview_moment(interview_date)
    live = {c.question_id: c for c in cards if c.question_id in questions}
    recall_at = {qid: c.recall(at) for qid, c in live.items()}
    before = _mastery(topics, questions, recall_at)
    if not with_plan:
        return Forecast(interview_date, at, target, [
            TopicForecast(b.slug, b.title, b.questions, b.seen, b.recall, None) for b in before])
    plan, planned = _plan(live, questions, before, target, now, at,
                          review.scheduler_for(db_session=db_session, learner_id=learner_id))
    after = _mastery(topics, questions, planned)
    return Forecast(interview_date, at, target, [
        TopicForecast(b.slug, b.title, b.questions, b.seen, b.recall, a.recall)
        for b, a in zip(before, after, strict=True)], plan)


def _plan(live: dict[int, LightCard], questions: dict[int, str], before: list[TopicMastery],
          target: float, now: datetime, at: datetime,
          sched: Scheduler) -> tuple[list[PlanDay], dict[int, float]]:
    """Simulate FSRS (the learner's scheduler: their weights and retention) from `now` to `at`:
    every card is reviewed (Good) on the study day it falls due, every unseen question of a
    topic below target is introduced (spread evenly over the days, the last day kept for
    reviews), and on the last day any card still
    predicted below target at the interview gets one more review. Returns the days and each
    question's predicted recall at the interview under the plan."""
    days = max(0, min(MAX_PLAN_DAYS, math.ceil((at - now).total_seconds() / 86400)))
    if days == 0:
        return [], {qid: c.recall(at) for qid, c in live.items()}
    moments = [now + timedelta(days=k) for k in range(days)]
    weak = {t.slug for t in before if t.recall < target}
    # Weakest topics' unseen questions first.
    order = {t.slug: i for i, t in enumerate(sorted(before, key=lambda t: t.recall))}
    unseen = sorted((qid for qid, topic in questions.items() if qid not in live and topic in weak),
                    key=lambda q: (order.get(questions[q], 0), q))
    intro_days = max(1, days - 1) if days > 1 else 1
    per_day = math.ceil(len(unseen) / intro_days) if unseen else 0
    sim: dict[int, Card] = {qid: c.fsrs for qid, c in live.items() if c.fsrs is not None}
    never_reviewed = [qid for qid, c in live.items() if c.fsrs is None]
    unseen = never_reviewed + unseen
    plan: list[PlanDay] = []
    for k, m in enumerate(moments):
        horizon = moments[k + 1] if k + 1 < days else at
        reviews = 0
        last = k == days - 1
        for qid, card in sim.items():
            due = card.due < horizon
            if not due and last:
                due = sched.get_card_retrievability(card, at) < target
            if due:
                sim[qid], _ = sched.review_card(card, Rating.Good, review_datetime=m)
                reviews += 1
        new = unseen[:per_day] if k < intro_days else []
        unseen = unseen[len(new):]
        for qid in new:
            sim[qid], _ = sched.review_card(Card(card_id=qid, due=m), Rating.Good, review_datetime=m)
        plan.append(PlanDay(m.date(), reviews, len(new)))
    return plan, {qid: float(sched.get_card_retrievability(c, at)) for qid, c in sim.items()}


# The dashboard ------------------------------------------------------------------------------


def _monday(d: date) -> date:
    return d - timedelta(days=d.weekday())


def _answers_by_day(db_session: Session, learner_id: str,
                    since: datetime) -> list[tuple[date, bool, int]]:
    """The learner's answers since `since`, counted per UTC day and correctness (in SQL: a
    learner with thousands of attempts sends back a few hundred rows, not thousands)."""
    if db_session.get_bind().dialect.name == "postgresql":
        day: Any = cast(func.timezone("UTC", Attempt.created_at), Date)
    else:
        # SQLite keeps UTC times as ISO text; its date() takes the day part.
        day = func.date(Attempt.created_at)
    rows = db_session.execute(
        select(day, Attempt.correct, func.count())
        .where(Attempt.learner_id == learner_id, Attempt.created_at >= since)
        .group_by(day, Attempt.correct))
    return [(d if isinstance(d, date) else date.fromisoformat(str(d)), bool(c), int(n))
            for d, c, n in rows]


def dashboard(*, db_session: Session, learner_id: str, now: datetime,
              with_plan: bool = True) -> Dashboard:
    """Everything the progress dashboard shows, for the learner at `now` (the page loads the
    forecast's plan separately: with_plan=False)."""
    questions, topics = _published(db_session)
    cards = _cards(db_session, learner_id)
    live = [c for c in cards if c.question_id in questions]
    recall_now = {c.question_id: c.recall(now) for c in live}
    mastery = _mastery(topics, questions, recall_now)

    today = now.date()
    heat_start = _monday(today) - timedelta(weeks=WEEKS_OF_HEATMAP - 1)
    acc_start = _monday(today) - timedelta(weeks=WEEKS_OF_ACCURACY - 1)
    since = datetime.combine(min(heat_start, acc_start), time(0, tzinfo=UTC))
    weeks = {acc_start + timedelta(weeks=i): WeekAccuracy(acc_start + timedelta(weeks=i), 0, 0)
             for i in range(WEEKS_OF_ACCURACY)}
    days: dict[date, int] = defaultdict(int)
    total = 0
    for day, correct, n in _answers_by_day(db_session, learner_id, since):
        total += n
        days[day] += n
        w = weeks.get(_monday(day))
        if w is not None:
            w.attempts += n
            w.correct += n if correct else 0

    # Calendar days from midnight UTC; today's count includes everything overdue.
    per_day = review.due_per_day(db_session=db_session, learner_id=learner_id,
                                 start=datetime.combine(today, time(0, tzinfo=UTC)),
                                 days=DUE_DAYS)
    due_by_day = [(today + timedelta(days=i), n) for i, n in enumerate(per_day)]

    goal = get_goal(db_session=db_session, learner_id=learner_id)
    fc = None
    if goal is not None and goal.interview_date is not None and goal.interview_date >= today:
        fc = forecast(db_session=db_session, learner_id=learner_id,
                      interview_date=goal.interview_date, target=goal.target, now=now,
                      cards=cards, questions=questions, topics=topics, with_plan=with_plan)
    return Dashboard(
        now=now, mastery=mastery, weeks=list(weeks.values()), days=dict(days),
        heatmap_start=heat_start, due_by_day=due_by_day,
        weakest=sorted(mastery, key=lambda m: (m.recall, m.title))[:3],
        reports=reports.my_reports(db_session=db_session, learner_id=learner_id),
        goal=goal, forecast=fc, total_attempts=total)
