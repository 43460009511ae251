"""The progress dashboard (charts with tables, due week, weakest topics, report statuses) and
the readiness forecast: numbers from known FSRS cards at an injected date, and the plan."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from fsrs import Card, Rating
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.accounts.models import Learner
from app.clock import FixedClock
from app.progress.service import interview_moment
from app.questions.models import Question
from app.review.models import ReviewCard, ReviewLog
from app.review.service import SCHEDULER
from app.settings import Settings
from tests.factories import FIXTURE, T0, answer, form_fields, learner_id, parse, text

# Known cards: (slug, rating, reviewed days before T0).
KNOWN = [("fixture-single", Rating.Good, 0), ("fixture-multi", Rating.Again, 0),
         ("fixture-trace-join", Rating.Easy, 5)]


def _known_cards(client: TestClient, settings: Settings,
                 session_factory: sessionmaker[Session]) -> dict[str, Card]:
    """Store KNOWN as the client's learner's cards; returns each slug's fsrs Card."""
    client.get("/")
    learner = learner_id(client, settings)
    cards = {}
    with session_factory.begin() as s:
        s.add(Learner(id=learner))
        s.flush()
        for slug, rating, days_before in KNOWN:
            qid = s.scalar(select(Question.id).where(Question.slug == slug))
            at = T0 - timedelta(days=days_before)
            card, log = SCHEDULER.review_card(Card(card_id=qid, due=at), rating, review_datetime=at)
            row = ReviewCard(learner_id=learner, question_id=qid, card=dict(card.to_dict()),
                             due=card.due, reps=1, last_review=at, last_rating=int(rating))
            s.add(row)
            s.flush()
            s.add(ReviewLog(card_id=row.id, learner_id=learner, rating=int(rating), reviewed_at=at,
                            log=dict(log.to_dict())))
            cards[slug] = card
    return cards


def _set_goal(client: TestClient, when: str, target: str = "90") -> object:
    page = parse(client.get("/dashboard"))
    action, hidden = form_fields(page, "form.goal-form")
    return client.post(action, data={**hidden, "interview_date": when, "target": target},
                       follow_redirects=False)


def test_the_forecast_is_fsrs_recall_at_the_interview_averaged_with_unseen_as_zero(
    client: TestClient, clock: FixedClock, settings: Settings,
    session_factory: sessionmaker[Session],
) -> None:
    cards = _known_cards(client, settings, session_factory)
    when = (T0 + timedelta(days=7)).date()
    assert _set_goal(client, when.isoformat()).status_code == 303  # type: ignore[attr-defined]
    at = interview_moment(when)
    assert at == datetime(when.year, when.month, when.day, 9, 0, tzinfo=UTC)

    def r(slug: str) -> float:
        return float(SCHEDULER.get_card_retrievability(cards[slug], at))

    # basics has three questions (one unseen), traces two (one unseen). fixture-multi's last
    # review was Again (a miss): it counts 0 until it is answered right, whatever FSRS's recall.
    expected = {"basics": (r("fixture-single") + 0 + 0) / 3,
                "traces": (r("fixture-trace-join") + 0) / 2}
    fc = client.get("/api/v1/dashboard").json()["forecast"]
    assert fc["interview_date"] == when.isoformat() and fc["target"] == 0.9
    got = {t["slug"]: t["recall"] for t in fc["topics"]}
    assert got == pytest.approx(expected, abs=1e-9)
    assert {t["slug"]: t["seen"] for t in fc["topics"]} == {"basics": 2, "traces": 1}
    # The page shows the same numbers, rounded, in the chart's table fallback.
    page = parse(client.get("/dashboard"))
    shown = {tr["data-topic"]: text(tr.select_one(".forecast-recall"))
             for tr in page.select("table.topics-progress tbody tr")}
    assert shown == {k: f"{round(v * 100):.0f}%" for k, v in expected.items()}


def test_the_plan_introduces_every_unseen_question_and_reaches_the_target(
    client: TestClient, clock: FixedClock, settings: Settings,
    session_factory: sessionmaker[Session],
) -> None:
    _known_cards(client, settings, session_factory)
    when = (T0 + timedelta(days=14)).date()
    _set_goal(client, when.isoformat())
    fc = client.get("/api/v1/dashboard").json()["forecast"]
    plan = fc["plan"]
    assert len(plan) == 14 and plan[0]["day"] == T0.date().isoformat()
    # Two questions were never seen; both are introduced, before the last day.
    assert sum(p["new"] for p in plan) == 2 and plan[-1]["new"] == 0
    # The first day's reviews are every card due before tomorrow: none is due now, but the
    # two answered at T0 come back minutes later (FSRS's learning steps): today's, not
    # tomorrow's.
    assert client.get("/api/v1/review/queue").json()["due_count"] == 0
    today = client.get("/api/v1/dashboard").json()["today"]
    assert plan[0]["reviews"] == today["later_today"] + today["due_now"] == 2
    assert plan[0]["new"] == today["new_left"]
    for t in fc["topics"]:
        assert t["planned"] >= 0.9 > t["recall"]
    # The dashboard loads the table with the plan's column after itself (htmx), or links to
    # the plan without JavaScript.
    dash = parse(client.get("/dashboard"))
    assert dash.select_one("#topic-table[hx-get='/dashboard/plan'] a[href='/dashboard/plan']")
    for page in (parse(client.get("/dashboard/plan")),
                 parse(client.get("/dashboard/plan", headers={"HX-Request": "true"}))):
        assert len(page.select("table.plan tbody tr")) == 14
        assert "brings every topic to 90%" in text(page.select_one(".plan-verdict"))
        planned = [text(td) for td in page.select("td.forecast-planned")]
        assert len(planned) == 2 and all(int(p.rstrip("%")) >= 90 for p in planned)


def test_a_one_day_plan_cannot_promise_unseen_topics(
    client: TestClient, clock: FixedClock, settings: Settings,
    session_factory: sessionmaker[Session],
) -> None:
    _known_cards(client, settings, session_factory)
    _set_goal(client, (T0 + timedelta(days=1)).date().isoformat(), "95")
    fc = client.get("/api/v1/dashboard").json()["forecast"]
    assert fc["target"] == 0.95 and len(fc["plan"]) == 1
    assert all(0 <= t["planned"] <= 1 for t in fc["topics"])


@pytest.mark.parametrize(("when", "target"), [
    ("2020-01-01", "90"), ("not a date", "90"), ("", "abc"), ("", "100"), ("", "nan"),
    ("2026-03-10", "1e400"), ("9999-12-31", "90"),
])
def test_a_bad_interview_date_or_target_is_422_and_changes_nothing(
    client: TestClient, clock: FixedClock, when: str, target: str,
) -> None:
    r = _set_goal(client, when, target)
    assert r.status_code == 422  # type: ignore[attr-defined]
    assert parse(r).select_one("section.readiness .error") is not None  # type: ignore[arg-type]
    assert client.get("/api/v1/dashboard").json()["forecast"] is None


def test_clearing_the_date_removes_the_forecast(client: TestClient, clock: FixedClock) -> None:
    assert _set_goal(client, "2026-03-20").status_code == 303  # type: ignore[attr-defined]
    assert client.get("/api/v1/dashboard").json()["forecast"] is not None
    assert _set_goal(client, "").status_code == 303  # type: ignore[attr-defined]
    assert client.get("/api/v1/dashboard").json()["forecast"] is None


def test_every_dashboard_chart_has_a_title_a_description_and_a_table(
    client: TestClient, clock: FixedClock,
) -> None:
    answer(client, "fixture-single", FIXTURE["fixture-single"]["right"], "sure")
    _set_goal(client, "2026-03-20")
    page = parse(client.get("/dashboard"))
    svgs = page.select("svg.chart")
    assert {s["id"] for s in svgs} == {"rounds", "accuracy", "heatmap"}
    for svg in svgs:
        assert text(svg.select_one("title")) and text(svg.select_one("desc"))
        assert svg["role"] == "img"
        section = svg.find_parent("section")
        assert section is not None and section.select_one("table") is not None, svg["id"]
    assert page.select_one("a[href='/dashboard/readiness']") is not None
    method = parse(client.get("/dashboard/readiness"))
    assert "unseen" in text(method.select_one("main")) or "never answered" in text(method)


def test_the_dashboard_counts_days_weeks_and_the_due_week(
    client: TestClient, clock: FixedClock,
) -> None:
    answer(client, "fixture-single", FIXTURE["fixture-single"]["right"], "sure")
    answer(client, "fixture-multi", FIXTURE["fixture-multi"]["wrong"])
    clock.advance(timedelta(days=8))
    answer(client, "fixture-numeric", FIXTURE["fixture-numeric"]["right"])
    d = client.get("/api/v1/dashboard").json()
    day0, day8 = T0.date().isoformat(), (T0 + timedelta(days=8)).date().isoformat()
    assert d["days_practised"] == {day0: 2, day8: 1}
    weeks = {w["week"]: (w["attempts"], w["correct"]) for w in d["weeks"] if w["attempts"]}
    monday = T0.date() - timedelta(days=T0.weekday())
    assert weeks == {monday.isoformat(): (2, 1),
                     (monday + timedelta(weeks=1)).isoformat(): (1, 1)}
    assert len(d["due_next_7_days"]) == 7
    # The two T0 cards are overdue by day 8: they are due now, not "later today".
    assert d["due_now"] == d["today"]["due_now"] >= 2
    assert sum(t["due"] for t in d["topics"]) == d["due_now"]
    heat = parse(client.get("/dashboard")).select("svg#heatmap rect.day")
    shaded = {r["data-date"] for r in heat if "l0" not in r["class"]}
    assert shaded == {day0, day8}


def test_with_nothing_due_start_is_a_quiz_on_the_three_weakest_topics(
    client: TestClient, clock: FixedClock,
) -> None:
    for slug in ("fixture-trace-join", "fixture-trace-buckets"):
        answer(client, slug, FIXTURE[slug]["right"], "sure")
    page = parse(client.get("/dashboard"))
    weakest = page.select("form.start-today-form input[name=topics]")
    assert next(i["value"] for i in weakest) == "basics"
    action, hidden = form_fields(page, "form.start-today-form")
    data = {k: v for k, v in hidden.items() if k != "topics"}
    r = client.post(action, data={**data, "topics": [i["value"] for i in weakest]},
                    follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/quizzes/")


def test_the_dashboard_shows_the_learners_report_statuses_and_only_theirs(
    client: TestClient, clock: FixedClock, browser_client: TestClient,
) -> None:
    answer(client, "fixture-single", FIXTURE["fixture-single"]["right"])
    r = client.post("/api/v1/questions/fixture-single/reports",
                    json={"kind": "unclear", "comment": "which rank?"})
    assert r.status_code == 201
    statuses = [text(s) for s in parse(client.get("/dashboard")).select(".report-status")]
    assert statuses == ["open"]
    assert client.get("/api/v1/dashboard").json()["reports"][0]["status"] == "open"
    assert parse(browser_client.get("/dashboard")).select(".report-status") == []
    assert browser_client.get("/api/v1/dashboard").json()["reports"] == []


def test_the_forecast_for_an_untouched_learner_is_zero_everywhere(
    client: TestClient, clock: FixedClock,
) -> None:
    _set_goal(client, date(2026, 3, 9).isoformat())
    fc = client.get("/api/v1/dashboard").json()["forecast"]
    assert [t["recall"] for t in fc["topics"]] == [0.0, 0.0]
    assert sum(p["new"] for p in fc["plan"]) == 5


def test_the_dashboard_and_mock_interview_api_is_in_the_openapi_schema(client: TestClient) -> None:
    paths = client.get("/api/v1/openapi.json").json()["paths"]
    assert "get" in paths["/api/v1/dashboard"]
    assert "post" in paths["/api/v1/mock-interviews"]
    for path, method in (("/api/v1/mock-interviews/{mock_id}", "get"),
                         ("/api/v1/mock-interviews/{mock_id}/answers", "post"),
                         ("/api/v1/mock-interviews/{mock_id}/finish", "post"),
                         ("/api/v1/mock-interviews/{mock_id}/report", "get")):
        assert method in paths[path], path
    # The pages are not API: they stay out of the schema.
    assert not any(p.startswith(("/mock", "/dashboard", "/shared")) for p in paths)


def test_the_daily_goal_stays_put_while_the_learner_works_through_the_day(
    client: TestClient, clock: FixedClock, settings: Settings,
    session_factory: sessionmaker[Session],
) -> None:
    """Today's goal is the plan's day as it began: the cards due before tomorrow and the new
    questions; answering them (a due card, a new question, the same card again) moves the
    count answered and what is left, never the goal."""
    _known_cards(client, settings, session_factory)  # reviewed at T0 and before
    _set_goal(client, (T0 + timedelta(days=15)).date().isoformat())
    clock.advance(timedelta(days=1))  # the next morning: both learning cards are due

    def today() -> dict[str, int]:
        return client.get("/api/v1/dashboard").json()["today"]
    first = today()
    assert (first["due_now"], first["reviews_today"], first["new_today"]) == (2, 2, 1)
    assert first["daily_goal"] == 3 and first["answered_today"] == 0
    answer(client, "fixture-multi", FIXTURE["fixture-multi"]["wrong"])  # a due card, missed again
    answer(client, "fixture-numeric", FIXTURE["fixture-numeric"]["right"])  # today's new question
    answer(client, "fixture-multi", FIXTURE["fixture-multi"]["right"])  # the same card again
    after = today()
    assert after["answered_today"] == 3
    assert (after["reviews_today"], after["new_today"], after["daily_goal"]) == (2, 1, 3)
    page = parse(client.get("/"))
    assert text(page.select_one(".answered-today")) == "3 / 3"
    left = after["due_now"] + after["later_today"]
    assert text(page.select_one(".plan-today strong")) == f"{left} + {after['new_left']}"
