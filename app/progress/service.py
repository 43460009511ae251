"""The progress dashboard's numbers, today's panel and the readiness forecast
(docs/readiness.md).

Mastery of a topic is app/review/mastery.py's (the mean over its published questions of
each question's mastery, unseen ones counting 0). The forecast is the same mean at the
learner's interview date; the plan simulates FSRS forward, day by day, assuming each
scheduled review is recalled (Good), and counts the reviews and new questions each day
needs. Its first day's reviews are exactly the cards due now.

Every function takes the time (`now`) from the one clock (app/clock.py).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from fsrs import Card, Rating, Scheduler
from sqlalchemy import Date, cast, func, or_, select
from sqlalchemy.orm import Session

from app import reveal
from app.accounts.service import ensure_learner
from app.db import utcnow
from app.errors import InvalidInput
from app.progress.models import LearnerGoal
from app.questions.models import Question, Topic
from app.questions.schema import ROUND_TITLES, ROUNDS
from app.questions.service import get_published, revision_doc
from app.quizzes.models import Attempt
from app.reports import service as reports
from app.review import service as review
from app.review.mastery import TopicMastery, published_topics, topic_mastery
from app.verify import results as verify_results
from app.verify import service as verify
from app.verify.engine.result import RunResult
from app.verify.models import RUN_DONE, Run

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
class WeekAccuracy:
    week: date  # the Monday
    attempts: int
    correct: int

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.attempts if self.attempts else None


def _cards(db_session: Session, learner_id: str) -> list[review.CardState]:
    return review.card_states(db_session=db_session, learner_id=learner_id)


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
             now: datetime, cards: list[review.CardState] | None = None,
             questions: dict[int, str] | None = None, topics: list[Topic] | None = None,
             with_plan: bool = True) -> Forecast:
    """Per topic, FSRS's predicted recall at the interview (unseen questions count as 0), and
    (with_plan) the day-by-day plan of reviews and new questions to bring every topic to
    `target`, which simulates FSRS forward and so costs more than the forecast itself."""
    if questions is None or topics is None:
        questions, topics = published_topics(db_session)
    if cards is None:
        cards = _cards(db_session, learner_id)
    at = interview_moment(interview_date)
    live = {c.question_id: c for c in cards if c.question_id in questions}
    recall_at = {qid: c.mastery(at) for qid, c in live.items()}
    before = topic_mastery(topics, questions, recall_at)
    if not with_plan:
        return Forecast(interview_date, at, target, [
            TopicForecast(b.slug, b.title, b.questions, b.seen, b.recall, None) for b in before])
    plan, planned = _plan(live, questions, before, target, now, at,
                          review.scheduler_for(db_session=db_session, learner_id=learner_id))
    after = topic_mastery(topics, questions, planned)
    return Forecast(interview_date, at, target, [
        TopicForecast(b.slug, b.title, b.questions, b.seen, b.recall, a.recall)
        for b, a in zip(before, after, strict=True)], plan)


def _unseen_plan(live: dict[int, review.CardState], questions: dict[int, str],
                 before: list[TopicMastery], target: float, days: int) -> tuple[list[int], int, int]:
    """The questions the plan introduces (never-reviewed cards first, then the unseen
    questions of topics below target, weakest topic first), the number of days it spreads
    them over (all but the last), and how many a day."""
    weak = {t.slug for t in before if t.recall < target}
    order = {t.slug: i for i, t in enumerate(sorted(before, key=lambda t: t.recall))}
    unseen = sorted((qid for qid, topic in questions.items() if qid not in live and topic in weak),
                    key=lambda q: (order.get(questions[q], 0), q))
    intro_days = max(1, days - 1) if days > 1 else 1
    per_day = math.ceil(len(unseen) / intro_days) if unseen else 0
    return unseen, intro_days, per_day


def plan_days(now: datetime, at: datetime) -> int:
    """How many study days the plan has from `now` to the interview moment `at`."""
    return max(0, min(MAX_PLAN_DAYS, math.ceil((at - now).total_seconds() / 86400)))


def _plan(live: dict[int, review.CardState], questions: dict[int, str], before: list[TopicMastery],
          target: float, now: datetime, at: datetime,
          sched: Scheduler) -> tuple[list[PlanDay], dict[int, float]]:
    """Simulate FSRS (the learner's scheduler: their weights and retention) from `now` to `at`:
    on each study day (now, then every 24 hours) every card due before that day ends (UTC) is
    reviewed (Good), so the first day's reviews are the cards due before tomorrow; the
    unseen questions of topics below target are introduced, spread evenly over the days (the
    last day kept for reviews); and on the last day any card still predicted below target
    at the interview gets one more review. Returns the days and each question's predicted
    recall at the interview under the plan."""
    days = plan_days(now, at)
    if days == 0:
        return [], {qid: c.mastery(at) for qid, c in live.items()}
    moments = [now + timedelta(days=k) for k in range(days)]
    unseen, intro_days, per_day = _unseen_plan(live, questions, before, target, days)
    # A card with no FSRS state yet (never reviewed) starts from a fresh one, due when it is.
    sim: dict[int, Card] = {qid: c.fsrs if c.fsrs is not None else Card(card_id=qid, due=c.due)
                            for qid, c in live.items()}
    plan: list[PlanDay] = []
    for k, m in enumerate(moments):
        reviews = 0
        last = k == days - 1
        ends = _end_of_day(m)
        for qid, card in sim.items():
            due = card.due < ends
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


def _answers_by_day(db_session: Session, learner_id: str, since: datetime,
                    now: datetime) -> list[tuple[date, bool, int]]:
    """The learner's answers since `since`, counted per UTC day and correctness (in SQL: a
    learner with thousands of attempts sends back a few hundred rows, not thousands). The
    answers of a mock interview under way are not counted until it is over (the one rule:
    their grades would be feedback before the end)."""
    if db_session.get_bind().dialect.name == "postgresql":
        day: Any = cast(func.timezone("UTC", Attempt.created_at), Date)
    else:
        # SQLite keeps UTC times as ISO text; its date() takes the day part.
        day = func.date(Attempt.created_at)
    rows = db_session.execute(
        select(day, Attempt.correct, func.count())
        .where(Attempt.learner_id == learner_id, Attempt.created_at >= since,
               or_(Attempt.quiz_item_id.is_(None),
                   ~reveal.given_in_live_mock(Attempt.quiz_item_id, now)))
        .group_by(day, Attempt.correct))
    return [(d if isinstance(d, date) else date.fromisoformat(str(d)), bool(c), int(n))
            for d, c, n in rows]


@dataclass
class TopicRow:
    """One row of the dashboard's topic table: a topic's numbers, all from one definition."""

    slug: str
    title: str
    round: str
    questions: int
    seen: int
    now: float  # mastery now
    due: int  # cards due now
    on_date: float | None = None  # mastery at the interview if the learner stops now
    planned: float | None = None  # mastery at the interview if the learner follows the plan


@dataclass
class RoundRow:
    """A round's mastery: the mean over all of its topics' questions, unseen as 0."""

    slug: str
    title: str
    questions: int
    seen: int
    now: float
    on_date: float | None = None
    planned: float | None = None


@dataclass
class Today:
    """What to do now: the home page's and the dashboard's first panel."""

    now: datetime
    due_now: int
    later_today: int
    # Cards due before tomorrow as the day began (reviewed since, or not): today's reviews.
    reviews_today: int
    answered_today: int
    streak: int  # days in a row with an answer, up to today (or yesterday, if none yet today)
    goal: LearnerGoal | None
    # The plan's new questions today, as the day began (None without an interview date).
    new_today: int | None
    # What is left of the plan's day now: its new questions still to introduce today.
    new_left: int | None
    weakest: list[TopicMastery]
    answered_ever: bool

    @property
    def newcomer(self) -> bool:
        return not self.answered_ever and self.due_now == 0

    @property
    def daily_goal(self) -> int:
        """Today's answers to aim for: the plan's day as it began (every card due before
        tomorrow and the new questions), fixed while the learner works through it; DAILY_GOAL
        without a plan."""
        if self.new_today is None:
            return DAILY_GOAL
        return max(1, self.reviews_today + self.new_today)

    @property
    def reviews_left(self) -> int:
        """Every card due before tomorrow that is still to review: due now or later today."""
        return self.due_now + self.later_today

    @property
    def interview_date(self) -> date | None:
        return self.goal.interview_date if self.goal is not None else None

    @property
    def start(self) -> str:
        """What the one Start button does: review the due cards, else learn something new."""
        return "review" if self.due_now else "new"


# Answers a day to aim for when no interview date sets the pace: about 20 minutes.
DAILY_GOAL = 10
# The streak is counted over at most this many days back.
STREAK_DAYS = 366


def _streak(days: set[date], today: date) -> int:
    """Consecutive days with an answer ending today, or ending yesterday while today is open."""
    d = today if today in days else today - timedelta(days=1)
    n = 0
    while d in days:
        n += 1
        d -= timedelta(days=1)
    return n


def _end_of_day(now: datetime) -> datetime:
    return datetime.combine(now.date() + timedelta(days=1), time(0, tzinfo=UTC))


def _streak_since(now: datetime) -> datetime:
    return datetime.combine(now.date() - timedelta(days=STREAK_DAYS), time(0, tzinfo=UTC))


def _start_of_day(now: datetime) -> datetime:
    return datetime.combine(now.date(), time(0, tzinfo=UTC))


def _as_day_began(live: list[review.CardState],
                  began: dict[int, datetime | None]) -> dict[int, review.CardState]:
    """The cards the learner had as the day began, by question: those first answered today
    left out (`began`: review.due_before at the start of the day), so the plan's new
    questions for today are counted as they were then."""
    return {c.question_id: c for c in live
            if not (c.question_id in began and began[c.question_id] is None)}


def _reviews_today(live: list[review.CardState], began: dict[int, datetime | None],
                   end: datetime) -> int:
    """Cards due before `end` (tomorrow) as the day began: a card reviewed today counts by when
    it was due then, a card first answered today not at all."""
    n = 0
    for c in live:
        due = began.get(c.question_id, c.due) if c.question_id in began else c.due
        n += due is not None and due < end
    return n


def _today(db_session: Session, learner_id: str, now: datetime, live: list[review.CardState],
           mastery: list[TopicMastery], goal: LearnerGoal | None, new_today: int | None,
           new_left: int | None, per_day: dict[date, int],
           began: dict[int, datetime | None]) -> Today:
    """Today's panel from numbers the caller has read already (`per_day`: answers per day
    since at least STREAK_DAYS ago; `began`: review.due_before at the start of the day)."""
    today = now.date()
    answered_ever = bool(per_day) or db_session.scalar(
        select(Attempt.id).where(Attempt.learner_id == learner_id).limit(1)) is not None
    end = _end_of_day(now)
    return Today(
        now=now, due_now=sum(1 for c in live if c.is_due(now)),
        later_today=sum(1 for c in live if not c.is_due(now) and c.due < end),
        reviews_today=_reviews_today(live, began, end),
        answered_today=per_day.get(today, 0),
        streak=_streak({d for d, n in per_day.items() if n}, today), goal=goal,
        new_today=new_today, new_left=new_left,
        weakest=sorted(mastery, key=lambda m: (m.recall, m.title))[:3],
        answered_ever=answered_ever)


def _per_day(db_session: Session, learner_id: str, since: datetime,
             now: datetime) -> dict[date, int]:
    per_day: dict[date, int] = defaultdict(int)
    for day, _correct, n in _answers_by_day(db_session, learner_id, since, now):
        per_day[day] += n
    return dict(per_day)


def _active_goal(goal: LearnerGoal | None, today: date) -> LearnerGoal | None:
    if goal is None or goal.interview_date is None or goal.interview_date < today:
        return None
    return goal


def _new_today(live: dict[int, review.CardState], questions: dict[int, str],
               topics: list[Topic], goal: LearnerGoal, now: datetime,
               before: list[TopicMastery] | None = None) -> int:
    """The plan's new questions for today, without simulating it (the same rule as _plan);
    `before` is the forecast's mastery at the interview when the caller has it."""
    at = interview_moment(goal.interview_date) if goal.interview_date else now
    days = plan_days(now, at)
    if days == 0:
        return 0
    if before is None:
        before = topic_mastery(topics, questions, {qid: c.mastery(at) for qid, c in live.items()})
    unseen, _intro_days, per_day = _unseen_plan(live, questions, before, goal.target, days)
    return min(per_day, len(unseen))


def today(*, db_session: Session, learner_id: str, now: datetime) -> Today:
    """What the learner should do now: cards due, the plan's day, the streak, the daily goal."""
    questions, topics = published_topics(db_session)
    live = [c for c in _cards(db_session, learner_id) if c.question_id in questions]
    mastery = topic_mastery(topics, questions, {c.question_id: c.mastery(now) for c in live})
    goal = _active_goal(get_goal(db_session=db_session, learner_id=learner_id), now.date())
    began = review.due_before(db_session=db_session, learner_id=learner_id, at=_start_of_day(now))
    new = left = None
    if goal is not None:
        new = _new_today(_as_day_began(live, began), questions, topics, goal, _start_of_day(now))
        left = _new_today({c.question_id: c for c in live}, questions, topics, goal, now)
    return _today(db_session, learner_id, now, live, mastery, goal, new, left,
                  _per_day(db_session, learner_id, _streak_since(now), now), began)


def topic_rows(mastery: list[TopicMastery], topics: list[Topic], due: dict[str, int],
               fc: Forecast | None) -> list[TopicRow]:
    """The topic table: mastery now, the cards due now, and with a forecast its two columns."""
    rounds = {t.slug: t.round for t in topics}
    by_slug = {t.slug: t for t in fc.topics} if fc is not None else {}
    rows = []
    for m in mastery:
        f = by_slug.get(m.slug)
        rows.append(TopicRow(m.slug, m.title, rounds.get(m.slug, "ddp"), m.questions, m.seen,
                             m.recall, due.get(m.slug, 0), f.recall if f else None,
                             f.planned if f else None))
    return rows


def round_rows(rows: list[TopicRow]) -> list[RoundRow]:
    """The topic rows summed up per round (weighted by questions, as a topic's are)."""
    out = []
    for r in ROUNDS:
        mine = [t for t in rows if t.round == r]
        if not mine:
            continue
        n = sum(t.questions for t in mine)

        def mean(values: list[float | None], mine: list[TopicRow] = mine, n: int = n) -> float | None:
            if any(v is None for v in values):
                return None
            return sum(float(v) * t.questions for v, t in zip(values, mine, strict=True)
                       if v is not None) / n
        out.append(RoundRow(r, ROUND_TITLES[r], n, sum(t.seen for t in mine),
                            mean([t.now for t in mine]) or 0.0,
                            mean([t.on_date for t in mine]), mean([t.planned for t in mine])))
    return out


@dataclass
class Dashboard:
    now: datetime
    today: Today
    rows: list[TopicRow]
    rounds: list[RoundRow]
    mastery: list[TopicMastery]
    weeks: list[WeekAccuracy]
    days: dict[date, int]  # attempts per day over the heatmap's weeks
    heatmap_start: date
    coming: list[tuple[date, int]]  # cards falling due after now, per day (today = later today)
    reports: list[reports.ReportRow]
    goal: LearnerGoal | None
    forecast: Forecast | None
    total_attempts: int = 0

    @property
    def weakest(self) -> list[TopicMastery]:
        return self.today.weakest

    @property
    def due_now(self) -> int:
        return self.today.due_now


def dashboard(*, db_session: Session, learner_id: str, now: datetime,
              with_plan: bool = True) -> Dashboard:
    """Everything the progress dashboard shows, for the learner at `now` (the page loads the
    forecast's plan separately: with_plan=False)."""
    questions, topics = published_topics(db_session)
    cards = _cards(db_session, learner_id)
    live = [c for c in cards if c.question_id in questions]
    mastery = topic_mastery(topics, questions, {c.question_id: c.mastery(now) for c in live})

    today = now.date()
    heat_start = _monday(today) - timedelta(weeks=WEEKS_OF_HEATMAP - 1)
    acc_start = _monday(today) - timedelta(weeks=WEEKS_OF_ACCURACY - 1)
    # One read of the answers per day serves the heatmap, the weeks and the streak.
    since = min(datetime.combine(min(heat_start, acc_start), time(0, tzinfo=UTC)),
                _streak_since(now))
    weeks = {acc_start + timedelta(weeks=i): WeekAccuracy(acc_start + timedelta(weeks=i), 0, 0)
             for i in range(WEEKS_OF_ACCURACY)}
    days: dict[date, int] = defaultdict(int)
    every_day: dict[date, int] = defaultdict(int)
    total = 0
    for day, correct, n in _answers_by_day(db_session, learner_id, since, now):
        every_day[day] += n
        if day < heat_start:
            continue
        total += n
        days[day] += n
        w = weeks.get(_monday(day))
        if w is not None:
            w.attempts += n
            w.correct += n if correct else 0

    # What comes due after now, by calendar day (UTC): today's count is "later today".
    midnight = datetime.combine(today, time(0, tzinfo=UTC))
    coming = [0] * DUE_DAYS
    for c in live:
        if not c.is_due(now) and c.due < midnight + timedelta(days=DUE_DAYS):
            coming[(c.due - midnight) // timedelta(days=1)] += 1
    due_by_topic: dict[str, int] = defaultdict(int)
    for c in live:
        if c.is_due(now):
            due_by_topic[questions[c.question_id]] += 1

    goal = get_goal(db_session=db_session, learner_id=learner_id)
    active = _active_goal(goal, today)
    fc = None
    new_today = new_left = None
    began = review.due_before(db_session=db_session, learner_id=learner_id, at=_start_of_day(now))
    if active is not None and active.interview_date is not None:
        fc = forecast(db_session=db_session, learner_id=learner_id,
                      interview_date=active.interview_date, target=active.target, now=now,
                      cards=cards, questions=questions, topics=topics, with_plan=with_plan)
        new_left = (fc.plan[0].new if fc.plan else 0) if with_plan else _new_today(
            {c.question_id: c for c in live}, questions, topics, active, now,
            before=[TopicMastery(t.slug, t.title, t.questions, t.seen, t.recall)
                    for t in fc.topics])
        # Today's new questions as the day began (the goal stays put while they are answered).
        new_today = _new_today(_as_day_began(live, began), questions, topics, active,
                               _start_of_day(now))
    rows = topic_rows(mastery, topics, due_by_topic, fc)
    return Dashboard(
        now=now, today=_today(db_session, learner_id, now, live, mastery, active, new_today,
                              new_left, dict(every_day), began),
        rows=rows, rounds=round_rows(rows), mastery=mastery, weeks=list(weeks.values()),
        days=dict(days), heatmap_start=heat_start,
        coming=[(today + timedelta(days=i), n) for i, n in enumerate(coming)],
        reports=reports.my_reports(db_session=db_session, learner_id=learner_id),
        goal=goal, forecast=fc, total_attempts=total)


@dataclass
class TopicTable:
    """The dashboard's topic table on its own: what the plan's fragment replaces it with."""

    rows: list[TopicRow]
    forecast: Forecast | None


def topic_table(*, db_session: Session, learner_id: str, now: datetime) -> TopicTable:
    """The topic table with the plan's column (the forecast simulated forward), and no more
    of the dashboard than that."""
    questions, topics = published_topics(db_session)
    cards = _cards(db_session, learner_id)
    live = [c for c in cards if c.question_id in questions]
    mastery = topic_mastery(topics, questions, {c.question_id: c.mastery(now) for c in live})
    due: dict[str, int] = defaultdict(int)
    for c in live:
        if c.is_due(now):
            due[questions[c.question_id]] += 1
    goal = _active_goal(get_goal(db_session=db_session, learner_id=learner_id), now.date())
    fc = None
    if goal is not None and goal.interview_date is not None:
        fc = forecast(db_session=db_session, learner_id=learner_id, interview_date=goal.interview_date,
                      target=goal.target, now=now, cards=cards, questions=questions, topics=topics)
    return TopicTable(topic_rows(mastery, topics, due, fc), fc)


# The newcomer's example of Verify ---------------------------------------------------------

# The question the home page shows a newcomer, measured (DDP's averaged gradient, the first
# fact of the DDP round), with what to read in its values. Any other published question's
# cached run stands in without a reading.
EXAMPLES = {  # each in questions.service.SAMPLE_SLUGS: kept out of graded work
    "averaged-gradient-two-ranks": (
        "Two ranks feed different inputs to one model. The gradient comes out equal on both "
        "ranks and the loss does not: DDP averages gradients in backward and leaves the "
        "forward pass alone."),
}


@dataclass
class VerifyExample:
    """A question and what a real, cached run of its snippet measured."""

    slug: str
    title: str
    run_id: int
    result: RunResult
    reading: str = ""

    @property
    def value_rows(self) -> list[tuple[str, list[Any], bool]]:
        """(name, value per rank, the same on every rank) for each reported value."""
        names: list[str] = []
        for r in self.result.ranks:
            names += [n for n in r.values if n not in names]
        rows = []
        for n in names:
            vals = [r.values.get(n) for r in self.result.ranks]
            rows.append((n, vals, all(v == vals[0] for v in vals)))
        return rows


def _cached_default_run(db_session: Session, question: Question) -> Run | None:
    if question.current_revision is None:
        return None
    doc = revision_doc(question.current_revision)
    if doc.verify is None or doc.snippet_text is None or doc.is_exercise or doc.variables:
        return None
    torch_v, harness_v = verify.engine_versions()
    req = verify.request_for(doc, None, torch_version=torch_v, harness_version=harness_v)
    run = verify.find_live(db_session=db_session, key=req.key)
    return run if run is not None and run.status == RUN_DONE else None


def verify_example(*, db_session: Session) -> VerifyExample | None:
    """A measured answer to show a newcomer: an EXAMPLES question's cached run with the default
    knobs (None when it has not run yet: the page never starts a run for it). Only those: any
    other question's run is a measurement its learners see after answering, never on the
    home page (app/reveal.py)."""
    for slug, reading in EXAMPLES.items():
        question = get_published(db_session=db_session, slug=slug)
        run = _cached_default_run(db_session, question) if question is not None else None
        if question is not None and run is not None:
            result = verify_results.result_of(run)
            if result is not None and result.outcome == "ok":
                return VerifyExample(question.slug, question.title, run.id, result, reading)
    return None
