"""The progress dashboard: mastery per topic, accuracy, days practised, and with an interview
date the readiness forecast and its day-by-day plan."""

from __future__ import annotations

from datetime import date
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from app.deps import CSRF, ClockDep, CurrentLearner, FormDep, SessionDep, is_htmx
from app.mock import service as mock
from app.progress import service as progress
from app.render.charts import Bar, bar_chart, heatmap, line_chart
from app.templating import templates

router = APIRouter(include_in_schema=False)


def charts(d: progress.Dashboard) -> dict[str, Any]:
    """The dashboard's SVG charts, drawn from its numbers."""
    out: dict[str, Any] = {
        "mastery_chart": bar_chart(
            [Bar(m.title, m.recall) for m in d.mastery], svg_id="mastery",
            title="Mastery by topic",
            desc="FSRS's predicted recall today, averaged over each topic's questions "
                 "(unseen questions count as 0). The table below lists the same numbers."),
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
    if d.forecast is not None:
        out["forecast_chart"] = bar_chart(
            [Bar(t.title, t.recall) for t in d.forecast.topics], svg_id="forecast",
            target=d.forecast.target,
            title=f"Predicted recall on {d.forecast.interview_date.isoformat()}",
            desc="FSRS's predicted recall per topic on your interview date if you stop "
                 "practising now; the dashed line is your target. The table below lists "
                 "the same numbers.")
    return out


@router.get("/dashboard")
def dashboard_page(request: Request, db_session: SessionDep, learner_id: CurrentLearner,
                   clock: ClockDep) -> Response:
    d = progress.dashboard(db_session=db_session, learner_id=learner_id, now=clock.now(),
                           with_plan=False)
    return templates.TemplateResponse(request, "progress/dashboard.html", {
        "d": d, **charts(d), "mocks": mock.recent(db_session=db_session, learner_id=learner_id),
        "default_target": progress.DEFAULT_TARGET})


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
        return templates.TemplateResponse(request, "progress/dashboard.html", {
            "d": d, **charts(d), "mocks": mock.recent(db_session=db_session, learner_id=learner_id),
            "default_target": progress.DEFAULT_TARGET, "goal_error": msg}, status_code=422)
    return RedirectResponse("/dashboard#readiness", status_code=303)


@router.get("/dashboard/plan")
def plan_page(request: Request, db_session: SessionDep, learner_id: CurrentLearner,
              clock: ClockDep) -> Response:
    """The day-by-day plan to the interview: a fragment the dashboard loads after itself
    (it simulates FSRS forward, so the dashboard does not wait for it), or a page of its own."""
    now = clock.now()
    goal = progress.get_goal(db_session=db_session, learner_id=learner_id)
    fc = None
    if goal is not None and goal.interview_date is not None and goal.interview_date >= now.date():
        fc = progress.forecast(db_session=db_session, learner_id=learner_id,
                               interview_date=goal.interview_date, target=goal.target, now=now)
    name = "progress/_plan.html" if is_htmx(request) else "progress/plan.html"
    return templates.TemplateResponse(request, name, {"f": fc})


@router.get("/dashboard/readiness")
def readiness_method(request: Request) -> Response:
    """How the readiness forecast and its plan are worked out."""
    return templates.TemplateResponse(request, "progress/readiness.html", {
        "target": progress.DEFAULT_TARGET, "hour": progress.INTERVIEW_TIME.strftime("%H:%M")})
