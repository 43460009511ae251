"""The dashboard API (/api/v1): the learner's own mastery, accuracy, reviews due and forecast."""

from __future__ import annotations

from fastapi import APIRouter

from app.deps import API_BUSY, ClockDep, CurrentLearner, SessionDep
from app.progress import service as progress
from app.progress.schemas import (
    DashboardOut,
    DueDayOut,
    ForecastOut,
    ForecastTopicOut,
    PlanDayOut,
    ReportStatusOut,
    TodayOut,
    TopicMasteryOut,
    TopicRowOut,
    WeekOut,
)

router = APIRouter(prefix="/api/v1", tags=["progress"], responses=API_BUSY)


@router.get("/dashboard", response_model=DashboardOut)
def get_dashboard(db_session: SessionDep, learner_id: CurrentLearner,
                  clock: ClockDep) -> DashboardOut:
    """Today (cards due now, the plan's day, streak), your topics (mastery now, on the
    interview date, with the plan, due now), accuracy per week, days practised, cards falling
    due in the next 7 days, weakest topics, problem-report statuses and the forecast."""
    d = progress.dashboard(db_session=db_session, learner_id=learner_id, now=clock.now())
    fc = None
    if d.forecast is not None:
        f = d.forecast
        fc = ForecastOut(
            interview_date=f.interview_date, at=f.at, target=f.target,
            topics=[ForecastTopicOut(slug=t.slug, title=t.title, questions=t.questions,
                                     seen=t.seen, recall=t.recall, planned=t.planned)
                    for t in f.topics],
            plan=[PlanDayOut(day=p.day, reviews=p.reviews, new=p.new) for p in f.plan])

    def tm(m: progress.TopicMastery) -> TopicMasteryOut:
        return TopicMasteryOut(slug=m.slug, title=m.title, questions=m.questions, seen=m.seen,
                               recall=m.recall)

    t = d.today
    return DashboardOut(
        now=d.now,
        today=TodayOut(due_now=t.due_now, later_today=t.later_today,
                       reviews_today=t.reviews_today, new_today=t.new_today, new_left=t.new_left,
                       answered_today=t.answered_today, daily_goal=t.daily_goal,
                       streak=t.streak),
        due_now=t.due_now,
        topics=[TopicRowOut(slug=r.slug, title=r.title, round=r.round,
                            questions=r.questions, seen=r.seen, now=r.now, due=r.due,
                            on_date=r.on_date, planned=r.planned) for r in d.rows],
        mastery=[tm(m) for m in d.mastery],
        weeks=[WeekOut(week=w.week, attempts=w.attempts, correct=w.correct) for w in d.weeks],
        days_practised={k.isoformat(): v for k, v in sorted(d.days.items())},
        due_next_7_days=[DueDayOut(day=day, due=n) for day, n in d.coming],
        weakest=[tm(m) for m in d.weakest],
        reports=[ReportStatusOut(id=r.report.id, question=r.slug, status=r.report.status,
                                 note=r.report.note) for r in d.reports],
        forecast=fc)
