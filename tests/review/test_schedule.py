"""FSRS fitted to the learner: the fit (the package's Optimizer, in the fit worker's child
process) on a log made by a known FSRS model, the desired retention and the due dates it gives,
the weekly refit, the forecast on the learner's own weights, export and deletion."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from fsrs import Card, Rating, Scheduler
from fsrs.scheduler import DEFAULT_PARAMETERS
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.clock import FixedClock
from app.db import session_scope, utcnow
from app.progress import service as progress
from app.review import fitting
from app.review import service as review
from app.review.models import (
    FIT_DONE,
    FIT_QUEUED,
    FIT_RUNNING,
    FIT_WEEKLY,
    OUTCOME_FITTED,
    LearnerSchedule,
    ReviewCard,
    ReviewLog,
    ScheduleFit,
)
from app.review.worker import FitWorker
from app.settings import Settings
from tests.databases import ONE_DATABASE
from tests.factories import (
    FAST_FORGETTER,
    FIXTURE,
    T0,
    answer,
    count,
    form_fields,
    interval_error,
    learner_id,
    parse,
    parse_fragment,
    seed_review_log,
    sign_up,
    synthetic_reviews,
    text,
)


def _reviews(logs: list[Any]) -> list[fitting.Review]:
    return [fitting.Review(g.card_id, int(g.rating), g.review_datetime, g.review_duration)
            for g in logs]


def _csrf(client: TestClient, url: str = "/review/schedule") -> dict[str, str]:
    page = parse(client.get(url))
    return {"csrf_token": str(page.select_one("input[name=csrf_token]")["value"])}


@ONE_DATABASE  # the fit's arithmetic; its queue is tested on both databases below
def test_a_fit_from_a_known_models_log_schedules_closer_to_that_model_than_the_defaults(
    client: TestClient, clock: FixedClock, settings: Settings,
    session_factory: sessionmaker[Session],
) -> None:
    client.get("/")
    me = learner_id(client, settings)
    logs = synthetic_reviews(FAST_FORGETTER, cards=100, reviews=1200, seed=1)
    eligible = fitting.eligible_reviews(_reviews(logs))
    assert eligible >= fitting.MIN_FIT_REVIEWS
    cards = seed_review_log(session_factory, me, logs)
    page = parse(client.get("/review/schedule"))
    status = text(page.select_one(".schedule-status"))
    assert f"default parameters until {fitting.MIN_FIT_REVIEWS} reviews" in status
    assert f"you have {eligible} that count" in status
    action, hidden = form_fields(page, "form.fit-form")
    assert client.post(action, data=hidden, follow_redirects=False).status_code == 303
    # Queued: the panel says so and polls itself until the worker is done.
    panel = parse(client.get("/review/schedule"))
    assert panel.select_one("#schedule")["hx-trigger"].startswith("load")
    assert panel.select_one(".fit-pending") is not None and panel.select_one("form.fit-form") is None

    worker = FitWorker(session_factory, settings, clock=clock)
    assert worker.run_once() and worker.completed == 1
    with session_factory() as s:
        row = s.get(LearnerSchedule, me)
        fit = s.scalar(select(ScheduleFit).where(ScheduleFit.learner_id == me))
        assert row is not None and row.parameters is not None and fit is not None
        params = list(row.parameters)
        assert (fit.status, fit.outcome, fit.pending, fit.reviews) == (FIT_DONE, OUTCOME_FITTED, None,
                                                                       len(logs))
        assert row.fitted_at == T0 and row.fitted_reviews == len(logs)
        assert row.fitted_loss is not None and row.default_loss is not None
        assert row.fitted_loss < row.default_loss
        assert row.optimal_retention in (0.7, 0.75, 0.8, 0.85, 0.9, 0.95)
    assert len(params) == len(DEFAULT_PARAMETERS) and params != list(DEFAULT_PARAMETERS)

    # On a log the fit never saw, made by the same model, the fitted weights schedule closer
    # to the model and predict recall better than the defaults do.
    held_out = synthetic_reviews(FAST_FORGETTER, cards=120, reviews=1500, seed=99)
    assert interval_error(params, held_out) < interval_error(DEFAULT_PARAMETERS, held_out)
    fitted_loss = fitting.log_loss(params, _reviews(held_out))
    default_loss = fitting.log_loss(DEFAULT_PARAMETERS, _reviews(held_out))
    assert fitted_loss is not None and default_loss is not None and fitted_loss < default_loss

    # Every card is rescheduled by the new weights, and the learner is told.
    own = Scheduler(parameters=params, enable_fuzzing=False)
    with session_factory() as s:
        stored = {c.id: c for c in s.scalars(select(ReviewCard).where(ReviewCard.learner_id == me))}
    some = sorted(cards.items())[:10]
    for synthetic_id, card_id in some:
        seq = sorted((g for g in logs if g.card_id == synthetic_id), key=lambda g: g.review_datetime)
        expected = Card(card_id=card_id, due=seq[0].review_datetime)
        for g in seq:
            expected, _ = own.review_card(expected, g.rating, review_datetime=g.review_datetime)
        assert stored[card_id].due == expected.due
        assert stored[card_id].card["stability"] == pytest.approx(expected.stability)
    status = text(parse(client.get("/review/schedule")).select_one(".schedule-status"))
    assert f"own parameters, fitted from {len(logs)} reviews on 2026-03-02" in status


def _formula_interval(stability: float, retention: float, decay: float) -> int:
    """FSRS-6's interval for a card of this stability: the days until predicted recall falls to
    the desired retention (R(t) = (1 + FACTOR·t/S)^-decay), rounded, at least one."""
    factor = 0.9 ** (1 / -decay) - 1
    return max(1, round(stability / factor * (retention ** (1 / -decay) - 1)))


def test_the_retention_choice_moves_due_dates_as_fsrs_predicts(
    client: TestClient, clock: FixedClock, settings: Settings,
    session_factory: sessionmaker[Session],
) -> None:
    # Right, sure and quick is Easy: three cards straight into FSRS's review state.
    for slug in ("fixture-single", "fixture-multi", "fixture-numeric"):
        assert answer(client, slug, FIXTURE[slug]["right"], "sure").status_code == 200
    me = learner_id(client, settings)
    decay = DEFAULT_PARAMETERS[20]

    def intervals() -> dict[int, tuple[int, float]]:
        with session_factory() as s:
            cards = s.scalars(select(ReviewCard).where(ReviewCard.learner_id == me))
            return {c.id: ((c.due - c.last_review).days, c.card["stability"]) for c in cards
                    if c.last_review is not None}

    before = intervals()
    assert len(before) == 3
    for days, stability in before.values():
        assert days == _formula_interval(stability, 0.9, decay)
    r = client.post("/review/schedule", data={**_csrf(client), "desired_retention": "80"},
                    follow_redirects=False)
    assert r.status_code == 303
    after = intervals()
    for card_id, (days, stability) in after.items():
        assert stability == pytest.approx(before[card_id][1])  # memory is what it was
        assert days == _formula_interval(stability, 0.8, decay) > before[card_id][0]
    page = parse(client.get("/review/schedule"))
    assert page.select_one("input[name=desired_retention]")["value"] == "80"
    line = text(parse(client.get("/review")).select_one(".schedule-status"))
    assert "default parameters until 512 reviews, at 80% desired retention" in line
    chosen = page.select_one("table.workload tr.chosen")
    assert chosen is not None and chosen["data-retention"] == "0.80"
    # Answering again schedules with the new retention too.
    with session_factory() as s:
        card = s.scalar(select(ReviewCard).where(ReviewCard.learner_id == me)
                        .order_by(ReviewCard.due).limit(1))
        assert card is not None
        state, due = Card.from_dict(card.card), card.due.astimezone(UTC)
    clock.at = due
    question = parse(client.get("/review")).select_one("form.answer-form")["action"].split("/")[2]
    assert question in FIXTURE
    assert answer(client, question, FIXTURE[question]["right"], "sure", url="/review").status_code == 200
    expected, _ = Scheduler(desired_retention=0.8, enable_fuzzing=False).review_card(
        state, Rating.Easy, review_datetime=due)
    with session_factory() as s:
        again = s.get(ReviewCard, card.id)
        assert again is not None and again.due == expected.due


@pytest.mark.parametrize("value", ["69", "0.98", "99", "abc", ""])
def test_a_retention_outside_70_to_97_percent_is_refused_and_changes_nothing(
    client: TestClient, clock: FixedClock, settings: Settings,
    session_factory: sessionmaker[Session], value: str,
) -> None:
    answer(client, "fixture-single", FIXTURE["fixture-single"]["right"], "sure")
    r = client.post("/review/schedule", data={**_csrf(client), "desired_retention": value},
                    headers={"HX-Request": "true"})
    assert r.status_code == 422
    assert text(parse_fragment(r).select_one(".error"))
    assert count(session_factory, LearnerSchedule) == 0
    api = client.put("/api/v1/review/schedule", json={"desired_retention": 0.5})
    assert api.status_code == 422


def test_the_workload_table_costs_more_reviews_at_higher_retention(
    client: TestClient, clock: FixedClock, settings: Settings,
    session_factory: sessionmaker[Session],
) -> None:
    client.get("/")
    me = learner_id(client, settings)
    # Sixty cards reviewed over the last months: their next month is what the table shows.
    logs = synthetic_reviews(DEFAULT_PARAMETERS, cards=60, reviews=400, seed=3,
                             start=T0 - timedelta(days=120))
    seed_review_log(session_factory, me, [g for g in logs if g.review_datetime < T0])
    page = parse(client.get("/review/schedule"))
    rows = page.select("table.workload tbody tr")
    totals = {float(r["data-retention"]): float(text(r.select("td")[2])) for r in rows}
    assert set(totals) == set(fitting.RETENTION_CHOICES)
    assert totals[0.97] > totals[0.9] > totals[0.7] > 0
    # The busiest day after today tells the retentions apart (today is the backlog already
    # due, the same whatever the retention): no column that says one number seven times.
    busiest = {float(r["data-retention"]): float(text(r.select_one("td.busiest"))) for r in rows}
    assert busiest[0.97] > busiest[0.7] and len(set(busiest.values())) > 1
    # The API gives the same simulation.
    body = client.get("/api/v1/review/schedule").json()
    assert body["own_parameters"] is False and body["desired_retention"] == 0.9
    assert {w["retention"]: round(w["total"]) for w in body["workload"]} == {
        k: round(v) for k, v in totals.items()}


def test_a_fit_needs_enough_reviews_and_the_button_is_not_offered_before(
    client: TestClient, clock: FixedClock, settings: Settings,
) -> None:
    answer(client, "fixture-single", FIXTURE["fixture-single"]["right"], "sure")
    page = parse(client.get("/review/schedule"))
    assert page.select_one("form.fit-form") is None
    assert "you have 0 that count" in text(page.select_one(".schedule-status"))
    r = client.post("/review/schedule/fit", data=_csrf(client), headers={"HX-Request": "true"})
    assert r.status_code == 422 and "needs 512 reviews" in text(parse_fragment(r).select_one(".error"))
    assert client.post("/api/v1/review/schedule/fit").status_code == 422


def _fitted(session_factory: sessionmaker[Session], learner: str, at: Any) -> None:
    """A finished fit of `learner` at `at`, through the queue as a worker would finish one."""
    with session_scope(session_factory) as s:
        review._queue_fit(s, learner, "asked", at)
        fit = review.claim_fit(db_session=s, worker_id="w", lease_seconds=30)
        assert fit is not None
        result = fitting.FitResult(list(FAST_FORGETTER), 600, 600, 0.4, 0.5, 0.85, 1.0)
        assert review.complete_fit(db_session=s, fit_id=fit.id, worker_id="w", result=result, now=at)


def test_the_weekly_refit_queues_learners_with_new_reviews_a_week_after_their_last_fit(
    session_factory: sessionmaker[Session],
) -> None:
    few, many = str(uuid.uuid4()), str(uuid.uuid4())
    seed_review_log(session_factory, few, synthetic_reviews(DEFAULT_PARAMETERS, cards=10,
                                                            reviews=100, seed=1), topic="few")
    logs = synthetic_reviews(DEFAULT_PARAMETERS, cards=40, reviews=600, seed=2)
    seed_review_log(session_factory, many, logs, topic="many")
    last = max(g.review_datetime for g in logs)
    with session_scope(session_factory) as s:
        assert review.queue_weekly_refits(db_session=s, now=last) == 1
        assert review.queue_weekly_refits(db_session=s, now=last) == 0  # one pending at a time
        fit = review.pending_fit(db_session=s, learner_id=many)
        assert fit is not None and fit.reason == FIT_WEEKLY and fit.status == FIT_QUEUED
        s.delete(fit)
    _fitted(session_factory, many, last + timedelta(hours=1))
    with session_scope(session_factory) as s:
        # Within the week, or a week later without a new review: nothing to refit.
        assert review.queue_weekly_refits(db_session=s, now=last + timedelta(days=3)) == 0
        assert review.queue_weekly_refits(db_session=s, now=last + timedelta(days=8)) == 0
        s.add(ReviewLog(card_id=s.scalar(select(ReviewCard.id).where(ReviewCard.learner_id == many)
                                         .limit(1)),
                        learner_id=many, rating=3, reviewed_at=last + timedelta(days=2), log={}))
        s.flush()
        assert review.queue_weekly_refits(db_session=s, now=last + timedelta(days=3)) == 0
        assert review.queue_weekly_refits(db_session=s, now=last + timedelta(days=8)) == 1


def test_a_fit_whose_worker_died_is_claimed_again_and_the_dead_worker_cannot_finish_it(
    session_factory: sessionmaker[Session],
) -> None:
    learner = str(uuid.uuid4())
    seed_review_log(session_factory, learner, synthetic_reviews(DEFAULT_PARAMETERS, cards=5,
                                                                reviews=20, seed=4))
    with session_scope(session_factory) as s:
        review._queue_fit(s, learner, "asked", utcnow())
    with session_scope(session_factory) as s:
        # A lease that has already run out: its worker died without renewing it.
        first = review.claim_fit(db_session=s, worker_id="dead", lease_seconds=-1)
        assert first is not None and first.status == FIT_RUNNING
        fit_id = first.id
    with session_scope(session_factory) as s:
        second = review.claim_fit(db_session=s, worker_id="alive", lease_seconds=30)
        assert second is not None and second.id == fit_id and second.attempts == 2
    result = fitting.FitResult(None, 20, 5, None, 0.5, None, 0.1)
    with session_scope(session_factory) as s:
        assert not review.complete_fit(db_session=s, fit_id=fit_id, worker_id="dead", result=result,
                                       now=utcnow())
        assert review.complete_fit(db_session=s, fit_id=fit_id, worker_id="alive", result=result,
                                   now=utcnow())
    with session_factory() as s:
        fit = s.get(ScheduleFit, fit_id)
        assert fit is not None and fit.status == FIT_DONE and fit.outcome == "too_few"
        assert s.get(LearnerSchedule, learner) is None  # too few reviews: the defaults stay


def test_the_readiness_forecast_uses_the_learners_own_parameters(
    client: TestClient, clock: FixedClock, settings: Settings,
    session_factory: sessionmaker[Session],
) -> None:
    for slug in ("fixture-single", "fixture-multi"):
        answer(client, slug, FIXTURE[slug]["right"], "sure")
    me = learner_id(client, settings)
    interview = (T0 + timedelta(days=20)).date()
    with session_factory() as s:
        default = progress.forecast(db_session=s, learner_id=me, interview_date=interview,
                                    target=0.9, now=T0, with_plan=False)
    _fitted(session_factory, me, T0)
    at = progress.interview_moment(interview)
    own = Scheduler(parameters=FAST_FORGETTER, enable_fuzzing=False)
    with session_factory() as s:
        mine = progress.forecast(db_session=s, learner_id=me, interview_date=interview,
                                 target=0.9, now=T0, with_plan=True)
        cards = list(s.scalars(select(ReviewCard).where(ReviewCard.learner_id == me)))
    recall = [float(own.get_card_retrievability(Card.from_dict(c.card), at)) for c in cards]
    basics = next(t for t in mine.topics if t.slug == "basics")
    before = next(t for t in default.topics if t.slug == "basics")
    total_questions = basics.questions
    assert basics.recall == pytest.approx(sum(recall) / total_questions)
    assert basics.recall < before.recall  # a fast forgetter is predicted to forget sooner
    assert mine.plan and basics.planned is not None


def test_the_schedule_is_in_the_data_export_and_goes_with_the_account(
    client: TestClient, clock: FixedClock, settings: Settings,
    session_factory: sessionmaker[Session],
) -> None:
    answer(client, "fixture-single", FIXTURE["fixture-single"]["right"], "sure")
    # Chosen before signing up: the retention comes along with the anonymous history.
    r = client.post("/review/schedule", data={**_csrf(client), "desired_retention": "85"},
                    follow_redirects=False)
    assert r.status_code == 303
    anonymous = learner_id(client, settings)
    sign_up(client, "lena")
    with session_factory() as s:
        me = s.scalar(select(LearnerSchedule.learner_id))
    assert me is not None and me != anonymous
    assert "at 85% desired retention" in text(parse(client.get("/review")).select_one(".schedule-status"))
    _fitted(session_factory, me, T0)
    data = json.loads(client.get("/account/export.json").text)
    assert data["schedule"]["desired_retention"] == 0.85
    assert data["schedule"]["parameters"] == pytest.approx(list(FAST_FORGETTER))
    assert data["schedule"]["fitted_reviews"] == 600
    assert [f["outcome"] for f in data["schedule_fits"]] == ["fitted"]
    page = parse(client.get("/account"))
    action, hidden = form_fields(page, "form.delete-account")
    assert client.post(action, data={**hidden, "confirm": "lena"}).status_code == 200
    assert count(session_factory, LearnerSchedule) == 0
    assert count(session_factory, ScheduleFit) == 0


def test_a_fit_that_runs_past_its_time_is_stopped_and_queued_again(
    client: TestClient, clock: FixedClock, settings: Settings,
    session_factory: sessionmaker[Session],
) -> None:
    client.get("/")
    me = learner_id(client, settings)
    seed_review_log(session_factory, me, synthetic_reviews(FAST_FORGETTER, cards=60, reviews=900,
                                                           seed=5))
    with session_scope(session_factory) as s:
        review.request_fit(db_session=s, learner_id=me, now=T0)
    # A real fitting process, given no time: killed at its first look, the attempt counted.
    assert FitWorker(session_factory, settings, clock=clock, timeout_s=0.0).run_once()
    with session_factory() as s:
        fit = s.scalar(select(ScheduleFit).where(ScheduleFit.learner_id == me))
        assert fit is not None and fit.status == FIT_QUEUED and fit.pending is True
        assert fit.attempts == 1 and "ran past" in (fit.failure_reason or "")
        assert s.get(LearnerSchedule, me) is None  # the schedule is untouched


@pytest.mark.parametrize("bad", [
    '{"parameters": [0.1], "reviews": 1, "eligible": 1, "fitted_loss": null, "default_loss": null,'
    ' "optimal_retention": null, "seconds": 1}',
    '{"parameters": ' + str([1000.0] * 21) + ', "reviews": 1, "eligible": 1, "fitted_loss": 0.1,'
    ' "default_loss": 0.2, "optimal_retention": null, "seconds": 1}',
    '{"parameters": null, "reviews": 1, "eligible": 1, "fitted_loss": NaN, "default_loss": 0.2,'
    ' "optimal_retention": null, "seconds": 1}',
    '{"parameters": null, "reviews": 1, "eligible": 1, "fitted_loss": null, "default_loss": null,'
    ' "optimal_retention": 1.5, "seconds": 1}',
    "Traceback (most recent call last):", "",
])
def test_what_a_fitting_process_sends_back_is_checked_before_it_is_stored(bad: str) -> None:
    with pytest.raises(ValueError, match="not a fit result"):
        fitting.result_from_json(bad)
    good = fitting.result_from_json(
        '{"parameters": ' + str(list(FAST_FORGETTER)) + ', "reviews": 900, "eligible": 600,'
        ' "fitted_loss": 0.4, "default_loss": 0.5, "optimal_retention": 0.85, "seconds": 3.5}')
    assert good.parameters == list(FAST_FORGETTER) and good.optimal_retention == 0.85
