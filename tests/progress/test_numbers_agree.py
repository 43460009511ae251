"""One definition each of "due", "recall" and "mastery" (app/review/service.py): at the same
instant the same learner sees the same numbers in the header's badge, on the Review page, the
home page, the dashboard, the plan and the API; and a topic answered 1 out of 3 right right
now is far from mastered, although FSRS's recall of every card just seen is near 100%."""

from __future__ import annotations

from datetime import timedelta

import pytest
from fastapi.testclient import TestClient

from app.clock import FixedClock
from tests.factories import FIXTURE, T0, answer, form_fields, parse, text


def _goal(client: TestClient, days: int) -> None:
    action, hidden = form_fields(parse(client.get("/dashboard")), "form.goal-form")
    r = client.post(action, data={**hidden, "interview_date": (T0 + timedelta(days=days)).date()
                                  .isoformat(), "target": "90"}, follow_redirects=False)
    assert r.status_code == 303


def _counts(client: TestClient) -> dict[str, int]:
    """Every place that says how many cards are due, read at the clock's current instant."""
    nav = parse(client.get("/me/nav"))
    badge = nav.select_one(".due-count")
    review = parse(client.get("/review"))
    status = text(review.select_one(".review-status"))
    home = parse(client.get("/"))
    dash = parse(client.get("/dashboard"))
    api = client.get("/api/v1/dashboard").json()
    return {
        "header badge": int(text(badge)) if badge else 0,
        "review page": int(status.split()[0]) if status[0].isdigit() else 0,
        "review API": client.get("/api/v1/review/queue").json()["due_count"],
        "home page": int(home.select_one(".due-now")["data-due-now"]),
        "dashboard": int(dash.select_one(".due-now")["data-due-now"]),
        "dashboard table": sum(int(td["data-value"]) for td in dash.select("td.due")),
        "dashboard API": api["due_now"],
        "dashboard API, today": api["today"]["due_now"],
        "dashboard API, topics": sum(t["due"] for t in api["topics"]),
    }


def _due_before_tomorrow(client: TestClient) -> dict[str, int]:
    """Every place that counts the reviews left today: the plan's first day is every card due
    before tomorrow (UTC), the cards due now and those falling due later today."""
    plan = parse(client.get("/dashboard/plan", headers={"HX-Request": "true"}))
    api = client.get("/api/v1/dashboard").json()
    home = parse(client.get("/"))
    return {
        "plan, today": int(text(plan.select("table.plan tbody tr")[0].select("td")[1])),
        "plan API, today": api["forecast"]["plan"][0]["reviews"],
        "due now and later today": api["today"]["due_now"] + api["today"]["later_today"],
        "home page, left today": int(text(home.select_one(".plan-today strong")).split(" + ")[0]),
    }


@pytest.mark.parametrize("later", [timedelta(minutes=5), timedelta(days=2), timedelta(days=9)])
def test_every_page_and_the_api_count_the_same_cards_due_at_the_same_instant(
    client: TestClient, clock: FixedClock, later: timedelta,
) -> None:
    # Misses come back within minutes, right answers after days: a spread of due times.
    answer(client, "fixture-single", FIXTURE["fixture-single"]["wrong"], "sure")
    answer(client, "fixture-multi", FIXTURE["fixture-multi"]["right"], "unsure")
    answer(client, "fixture-numeric", FIXTURE["fixture-numeric"]["right"], "sure")
    clock.advance(timedelta(hours=3))
    answer(client, "fixture-trace-join", FIXTURE["fixture-trace-join"]["wrong"])
    _goal(client, 20)
    clock.advance(later)
    counts = _counts(client)
    assert len(set(counts.values())) == 1, counts
    left = _due_before_tomorrow(client)
    assert len(set(left.values())) == 1, left
    due_now = counts["header badge"]
    assert due_now >= 1 or later < timedelta(minutes=10)


def test_a_topic_answered_one_in_three_right_is_not_mastered_anywhere(
    client: TestClient, clock: FixedClock,
) -> None:
    answer(client, "fixture-single", FIXTURE["fixture-single"]["right"], "sure")
    answer(client, "fixture-multi", FIXTURE["fixture-multi"]["wrong"], "sure")
    answer(client, "fixture-numeric", FIXTURE["fixture-numeric"]["wrong"], "sure")
    clock.advance(timedelta(minutes=2))
    api = client.get("/api/v1/dashboard").json()
    basics = next(t for t in api["topics"] if t["slug"] == "basics")
    # FSRS's recall of all three cards is near 1 two minutes after seeing them; mastery
    # counts the two misses as 0.
    assert 0.3 < basics["now"] <= 1 / 3 + 1e-9
    assert next(m["recall"] for m in api["mastery"] if m["slug"] == "basics") == basics["now"]
    shown = parse(client.get("/dashboard")).select_one("tr[data-topic=basics] .mastery-now")
    assert text(shown) == f"{round(basics['now'] * 100)}%"
    # The home page's round line reads the same mastery (basics is the DDP round's only topic).
    home = text(parse(client.get("/")).select_one("li.round-row[data-round=ddp]"))
    assert f"{round(basics['now'] * 100)}% mastered" in home
    # Answering the misses right brings them in.
    answer(client, "fixture-multi", FIXTURE["fixture-multi"]["right"], "sure")
    answer(client, "fixture-numeric", FIXTURE["fixture-numeric"]["right"], "sure")
    after = client.get("/api/v1/dashboard").json()
    assert next(t["now"] for t in after["topics"] if t["slug"] == "basics") > 0.9
