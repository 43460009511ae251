"""The home page (today's work, or for a newcomer what DDP Drill is) and the progress
dashboard: today's panel, one topic table (mastery now, on the interview date,
with the plan, due) with one chart by round, accuracy and days practised."""

from __future__ import annotations

from datetime import date
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from app.deps import CSRF, ClockDep, CurrentLearner, FormDep, SessionDep, is_htmx
from app.mock import service as mock
from app.progress import service as progress
from app.questions import service as questions
from app.render.charts import Bar, bar_chart, heatmap, line_chart
from app.review.mastery import mastery_by_topic
from app.templating import templates

router = APIRouter(include_in_schema=False)


@router.get("/")
def home(request: Request, db_session: SessionDep, learner_id: CurrentLearner,
         clock: ClockDep) -> Response:
    """Today first: what is due, the plan's day, the streak and one Start button; a newcomer
    gets one sentence, a measured example of Verify and the DDP round instead."""
    summaries = questions.topic_summaries(db_session=db_session)
    today = progress.today(db_session=db_session, learner_id=learner_id, now=clock.now())
    mastery = (mastery_by_topic(db_session=db_session, learner_id=learner_id,
                                         now=clock.now()) if not today.newcomer else {})
    rounds = questions.topic_rounds(summaries)
    return templates.TemplateResponse(request, "progress/home.html", {
        "t": today, "rounds": rounds, "total": sum(s.count for s in summaries),
        "round_mastery": {r.slug: _mean_mastery(r, mastery) for r in rounds},
        "example": progress.verify_example(db_session=db_session) if today.newcomer else None})


def _mean_mastery(r: questions.RoundGroups, mastery: dict[str, float]) -> float:
    n = sum(t.count for t in r.topics)
    return sum(mastery.get(t.topic.slug, 0.0) * t.count for t in r.topics) / n if n else 0.0


def charts(d: progress.Dashboard) -> dict[str, Any]:
    """The dashboard's SVG charts, drawn from its numbers."""
    f = d.forecast
    if f is None:
        desc = ("Mastery now per interview round: the mean over the round's questions of FSRS's "
                "predicted recall where the last answer was right (0 otherwise, and for unseen "
                "questions). The topic table below lists the same numbers per topic.")
        bars = [Bar(r.title, r.now) for r in d.rounds]
    elif any(r.planned is not None for r in d.rounds):
        desc = (f"Mastery per interview round now (the bars) and, marked on each bar, on "
                f"{f.interview_date.isoformat()} if you follow the plan; the dashed line is your "
                "target. The topic table below lists the same numbers per topic.")
        bars = [Bar(r.title, r.now, r.planned, "with the plan") for r in d.rounds]
    else:
        desc = ("Mastery per interview round now; the dashed line is your target. The topic "
                "table below lists the same numbers per topic, with the plan's once it loads.")
        bars = [Bar(r.title, r.now) for r in d.rounds]
    out: dict[str, Any] = {
        "rounds_chart": bar_chart(bars, svg_id="rounds", title="Readiness by round", desc=desc,
                                  target=f.target if f is not None else None),
        "accuracy_chart": line_chart(
            [(w.week.strftime("%d %b"), w.accuracy) for w in d.weeks], svg_id="accuracy",
            title="Accuracy per week",
            desc=f"Share of answers right in each of the last {len(d.weeks)} weeks; weeks "
                 "without answers leave a gap. The table below lists the same numbers."),
        "heatmap": heatmap(d.days, d.heatmap_start, d.now.date(), svg_id="heatmap",
                           title="Days practised",
                           desc="One square per day, a column per week, darker for more answers "
                                "that day. The table below lists the days with answers."),
    }
    return out


def _page(request: Request, d: progress.Dashboard, mocks: Any, **extra: Any) -> Response:
    return templates.TemplateResponse(request, "progress/dashboard.html", {
        "d": d, "t": d.today, **charts(d), "mocks": mocks,
        "default_target": progress.DEFAULT_TARGET, **extra},
        status_code=422 if "goal_error" in extra else 200)


@router.get("/dashboard")
def dashboard_page(request: Request, db_session: SessionDep, learner_id: CurrentLearner,
                   clock: ClockDep) -> Response:
    d = progress.dashboard(db_session=db_session, learner_id=learner_id, now=clock.now(),
                           with_plan=False)
    return _page(request, d, mock.recent(db_session=db_session, learner_id=learner_id))


@router.post("/dashboard/goal")
def set_goal(request: Request, form: FormDep, db_session: SessionDep,
             learner_id: CurrentLearner, clock: ClockDep, _: CSRF) -> Response:
    """Set or clear the interview date and the readiness target (in percent)."""
    raw_date, raw_target = form.get("interview_date"), form.get("target")
    try:
        when = date.fromisoformat(raw_date) if isinstance(raw_date, str) and raw_date else None
        target = float(raw_target) / 100 if isinstance(raw_target, str) and raw_target else None
        if target is not None and target != target:  # NaN
            raise ValueError
        progress.set_goal(db_session=db_session, learner_id=learner_id, interview_date=when,
                          target=target, now=clock.now())
    except (ValueError, OverflowError, progress.GoalError) as exc:
        msg = str(exc) if isinstance(exc, progress.GoalError) else \
            "Give the date as YYYY-MM-DD and the target as a percentage."
        d = progress.dashboard(db_session=db_session, learner_id=learner_id, now=clock.now(),
                               with_plan=False)
        return _page(request, d, mock.recent(db_session=db_session, learner_id=learner_id),
                     goal_error=msg)
    return RedirectResponse("/dashboard#readiness", status_code=303)


@router.get("/dashboard/plan")
def plan_page(request: Request, db_session: SessionDep, learner_id: CurrentLearner,
              clock: ClockDep) -> Response:
    """The topic table with the plan's column and the day-by-day plan: a fragment that
    replaces the dashboard's table once loaded (the plan simulates FSRS forward, so the
    dashboard does not wait for it), or a page of its own."""
    d = progress.topic_table(db_session=db_session, learner_id=learner_id, now=clock.now())
    name = "progress/_topics.html" if is_htmx(request) else "progress/plan.html"
    return templates.TemplateResponse(request, name, {"d": d, "with_plan": True})


@router.get("/dashboard/readiness")
def readiness_method(request: Request) -> Response:
    """How the readiness forecast and its plan are worked out."""
    return templates.TemplateResponse(request, "progress/readiness.html", {
        "target": progress.DEFAULT_TARGET, "hour": progress.INTERVIEW_TIME.strftime("%H:%M")})
