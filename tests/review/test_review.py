"""Confidence, FSRS review cards and the Review page, with time moved by an injected clock."""

from __future__ import annotations

from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from fsrs import Card, Rating
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from app.clock import Clock, FixedClock
from app.questions.models import STATUS_RETIRED, Question, QuestionRevision
from app.quizzes.models import Attempt
from app.review import service as review
from app.review.models import ReviewCard, ReviewLog
from app.review.service import FAST_MS, SCHEDULER, SLOW_MS, rating_for
from app.settings import Settings
from tests.factories import FIXTURE, T0, answer, form_fields, learner_id, parse, parse_fragment, text

# The mapping of docs/review.md, row by row: (score, correct, confidence, time ms) -> rating.
MAPPING = [
    (0.0, False, None, 5_000, Rating.Again),
    (0.0, False, "sure", 5_000, Rating.Again),
    (0.0, False, "guessing", None, Rating.Again),
    (0.5, False, None, 30_000, Rating.Hard),
    (0.5, False, "unsure", 30_000, Rating.Hard),
    (0.5, False, "guessing", 30_000, Rating.Again),
    (0.4, False, "sure", 30_000, Rating.Again),
    (1.0, True, "guessing", 5_000, Rating.Again),
    (1.0, True, "unsure", 5_000, Rating.Hard),
    (1.0, True, "sure", FAST_MS, Rating.Easy),
    (1.0, True, "sure", FAST_MS + 1, Rating.Good),
    (1.0, True, "sure", None, Rating.Good),
    (1.0, True, "sure", SLOW_MS + 60_000, Rating.Good),
    (1.0, True, None, 5_000, Rating.Good),
    (1.0, True, None, SLOW_MS, Rating.Good),
    (1.0, True, None, SLOW_MS + 1, Rating.Hard),
    (1.0, True, None, None, Rating.Good),
]


@pytest.mark.parametrize(("score", "correct", "confidence", "ms", "expected"), MAPPING)
def test_rating_mapping_follows_the_documented_table(
    score: float, correct: bool, confidence: str | None, ms: int | None, expected: Rating,
) -> None:
    assert rating_for(score=score, correct=correct, confidence=confidence,
                      time_taken_ms=ms) == expected


def test_the_documented_table_lists_every_confidence_level() -> None:
    from tests.test_docs import ROOT

    doc = (ROOT / "docs" / "review.md").read_text()
    for word in ("guessing", "unsure", "sure", "Again", "Hard", "Good", "Easy",
                 f"{FAST_MS // 1000} s", f"{SLOW_MS // 1000} s"):
        assert word in doc, word


def _card(session_factory: sessionmaker[Session], learner: str, slug: str) -> ReviewCard | None:
    with session_factory() as s:
        return s.scalar(select(ReviewCard).join(Question, Question.id == ReviewCard.question_id)
                        .where(ReviewCard.learner_id == learner, Question.slug == slug))


def _expected_after(ratings: list[tuple[Rating, timedelta]]) -> Card:
    """What FSRS itself schedules for these reviews, each at T0 + its offset."""
    card = Card(card_id=1, due=T0)
    for rating, at in ratings:
        card, _ = SCHEDULER.review_card(card, rating, review_datetime=T0 + at)
    return card


def test_answering_with_confidence_stores_it_and_schedules_the_card_as_fsrs_says(
    client: TestClient, clock: FixedClock, settings: Settings,
    session_factory: sessionmaker[Session],
) -> None:
    r = answer(client, "fixture-single", FIXTURE["fixture-single"]["right"], "unsure")
    assert r.status_code == 200
    me = learner_id(client, settings)
    with session_factory() as s:
        attempt = s.scalar(select(Attempt).where(Attempt.learner_id == me))
        assert attempt is not None and attempt.confidence == "unsure"
        assert attempt.created_at == T0
    card = _card(session_factory, me, "fixture-single")
    assert card is not None and card.reps == 1 and card.last_review == T0
    assert card.due == _expected_after([(Rating.Hard, timedelta(0))]).due
    # Not due yet: the Review page says so, and says when.
    page = parse(client.get("/review"))
    assert "Nothing is due" in text(page.select_one("main"))
    assert page.select_one("form.answer-form") is None
    # A day later FSRS says it is due: exactly that card is served.
    clock.advance(timedelta(days=1))
    page = parse(client.get("/review"))
    assert text(page.select_one(".review-status")) == "1 due for review"
    assert page.select_one("#q-title") is not None
    form = page.select_one("form.answer-form")
    assert form is not None and form["action"] == "/review/fixture-single/answer"
    assert page.select("input[name=confidence]")  # the same answer panel, confidence included
    nav = parse_fragment(client.get("/me/nav", headers={"HX-Request": "true"}))
    assert text(nav.select_one(".due-count")) == "1"
    # Answering it from the Review page reviews the card again, at the clock's time: right,
    # sure and within seconds is Easy.
    r = answer(client, "fixture-single", FIXTURE["fixture-single"]["right"], "sure",
               url="/review")
    assert r.status_code == 200
    card = _card(session_factory, me, "fixture-single")
    assert card is not None and card.reps == 2
    expected = _expected_after([(Rating.Hard, timedelta(0)), (Rating.Easy, timedelta(days=1))])
    assert card.due == expected.due and card.card["stability"] == pytest.approx(expected.stability)
    with session_factory() as s:
        logs = list(s.scalars(select(ReviewLog).where(ReviewLog.learner_id == me)
                              .order_by(ReviewLog.id)))
    assert [g.rating for g in logs] == [Rating.Hard, Rating.Easy]
    assert [g.reviewed_at for g in logs] == [T0, T0 + timedelta(days=1)]
    assert "Nothing is due" in text(parse(client.get("/review")).select_one("main"))


def test_the_queue_holds_exactly_the_cards_fsrs_says_are_due(
    client: TestClient, clock: FixedClock, settings: Settings,
) -> None:
    answer(client, "fixture-single", FIXTURE["fixture-single"]["wrong"])       # Again: 1 min
    answer(client, "fixture-numeric", FIXTURE["fixture-numeric"]["right"], "sure")  # Easy: days
    answer(client, "fixture-multi", FIXTURE["fixture-multi"]["right"], "unsure")   # Hard: minutes
    clock.advance(timedelta(minutes=2))
    queue = client.get("/api/v1/review/queue").json()
    assert [c["slug"] for c in queue["cards"]] == ["fixture-single"]
    assert queue["due_count"] == 1
    clock.advance(timedelta(days=1))
    queue = client.get("/api/v1/review/queue").json()
    assert sorted(c["slug"] for c in queue["cards"]) == ["fixture-multi", "fixture-single"]
    easy = _expected_after([(Rating.Easy, timedelta(0))])
    clock.at = easy.due - timedelta(seconds=1)
    assert "fixture-numeric" not in {c["slug"] for c in client.get("/api/v1/review/queue").json()["cards"]}
    clock.at = easy.due
    cards = {c["slug"]: c for c in client.get("/api/v1/review/queue").json()["cards"]}
    assert "fixture-numeric" in cards
    # At its due date FSRS predicts recall near the desired retention of 90%.
    assert cards["fixture-numeric"]["retrievability"] == pytest.approx(0.9, abs=0.02)


def test_retrievability_at_a_date_comes_from_the_service(
    client: TestClient, clock: FixedClock, settings: Settings,
    session_factory: sessionmaker[Session],
) -> None:
    answer(client, "fixture-single", FIXTURE["fixture-single"]["right"], "sure")
    me = learner_id(client, settings)
    card = _card(session_factory, me, "fixture-single")
    assert card is not None
    expected = _expected_after([(Rating.Easy, timedelta(0))])
    later = T0 + timedelta(days=30)
    assert review.retrievability(card=card, at=later) == pytest.approx(
        SCHEDULER.get_card_retrievability(expected, later))
    assert review.retrievability(card=card, at=T0 + timedelta(days=1)) > \
        review.retrievability(card=card, at=later)
    with session_factory() as s:
        by_q = review.retrievability_by_question(db_session=s, learner_id=me, at=later)
    assert list(by_q.values()) == [pytest.approx(review.retrievability(card=card, at=later))]


def test_a_retired_question_leaves_the_queue_and_a_new_revision_keeps_its_card(
    client: TestClient, clock: FixedClock, settings: Settings,
    session_factory: sessionmaker[Session],
) -> None:
    answer(client, "fixture-single", FIXTURE["fixture-single"]["wrong"])
    answer(client, "fixture-multi", FIXTURE["fixture-multi"]["wrong"])
    clock.advance(timedelta(days=1))
    me = learner_id(client, settings)
    before = _card(session_factory, me, "fixture-single")
    assert before is not None
    with session_factory.begin() as s:
        single = s.scalar(select(Question).where(Question.slug == "fixture-single"))
        assert single is not None and single.current_revision is not None
        old = single.current_revision
        new = QuestionRevision(question_id=single.id, number=old.number + 1, content=old.content,
                               snippet_text=old.snippet_text, content_hash="x" * 64, source="edit")
        s.add(new)
        s.flush()
        single.current_revision_id = new.id
        s.execute(update(Question).where(Question.slug == "fixture-multi")
                  .values(status=STATUS_RETIRED))
    queue = client.get("/api/v1/review/queue").json()
    assert [c["slug"] for c in queue["cards"]] == ["fixture-single"]
    after = _card(session_factory, me, "fixture-single")
    assert after is not None and after.id == before.id and after.reps == before.reps
    # Answering the new revision reviews the same card.
    answer(client, "fixture-single", FIXTURE["fixture-single"]["right"], url="/review")
    again = _card(session_factory, me, "fixture-single")
    assert again is not None and again.id == before.id and again.reps == before.reps + 1


def test_a_quiz_answer_and_an_api_answer_schedule_cards_too(
    client: TestClient, clock: FixedClock, settings: Settings,
    session_factory: sessionmaker[Session],
) -> None:
    r = client.post("/api/v1/questions/fixture-numeric/attempts",
                    json={"answer": 1400, "confidence": "guessing", "time_taken_ms": 4000})
    assert r.status_code == 200, r.text
    me = learner_id(client, settings)
    card = _card(session_factory, me, "fixture-numeric")
    assert card is not None and card.due == _expected_after([(Rating.Again, timedelta(0))]).due
    bad = client.post("/api/v1/questions/fixture-numeric/attempts",
                      json={"answer": 1400, "confidence": "certain"})
    assert bad.status_code == 422
    # A form's unknown confidence is ignored (the control is optional), never a 500.
    r = answer(client, "fixture-single", FIXTURE["fixture-single"]["right"], "certain")
    assert r.status_code == 200
    with session_factory() as s:
        attempt = s.scalar(select(Attempt).join(Question, Question.id == Attempt.question_id)
                           .where(Question.slug == "fixture-single"))
        assert attempt is not None and attempt.confidence is None


def test_the_confidence_control_is_optional_and_labelled(client: TestClient) -> None:
    page = parse(client.get("/questions/fixture-single"))
    group = page.select_one("form.answer-form fieldset.confidence")
    assert group is not None and "How sure are you?" in text(group.select_one("legend"))
    radios = group.select("input[type=radio][name=confidence]")
    assert [r["value"] for r in radios] == ["guessing", "unsure", "sure"]
    assert not any(r.has_attr("required") for r in radios)
    assert all(r.find_parent("label") is not None for r in radios)


def test_the_clock_offset_file_moves_the_real_clock(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "offset"
    clock = Clock(path)
    assert clock.offset() == timedelta(0)  # no file yet
    path.write_text("86400")
    assert clock.offset() == timedelta(days=1)
    before = Clock().now()
    moved = clock.now()
    after = Clock().now()
    assert before + timedelta(days=1) <= moved <= after + timedelta(days=1)
    path.write_text("not a number")
    assert clock.offset() == timedelta(0)


def test_due_per_day_counts_the_cards_falling_due_each_day(
    client: TestClient, clock: FixedClock, settings: Settings,
    session_factory: sessionmaker[Session],
) -> None:
    answer(client, "fixture-single", FIXTURE["fixture-single"]["wrong"])            # minutes
    answer(client, "fixture-numeric", FIXTURE["fixture-numeric"]["right"], "sure")  # Easy
    me = learner_id(client, settings)
    easy_due = _expected_after([(Rating.Easy, timedelta(0))]).due
    day = (easy_due - T0) // timedelta(days=1)
    with session_factory() as s:
        week = review.due_per_day(db_session=s, learner_id=me, start=T0, days=day + 2)
        later = review.due_per_day(db_session=s, learner_id=me, start=T0 + timedelta(days=1),
                                   days=1)
    assert week[0] == 1 and week[day] == 1 and sum(week) == 2
    assert later == [1]  # the overdue card counts on the first day


def test_after_each_review_the_page_says_when_the_card_comes_back_and_the_empty_state_says_until_when(
    client: TestClient, clock: FixedClock, settings: Settings,
    session_factory: sessionmaker[Session],
) -> None:
    from app.render.when import day_name, until

    answer(client, "fixture-single", FIXTURE["fixture-single"]["right"], "sure")
    clock.advance(timedelta(days=30))
    page = parse(client.get("/review"))
    action, hidden = form_fields(page, "form.answer-form")
    r = client.post(action, data={**hidden, "answer": FIXTURE["fixture-single"]["right"],
                                  "confidence": "sure"}, headers={"HX-Request": "true"})
    card = _card(session_factory, learner_id(client, settings), "fixture-single")
    assert card is not None and (card.due - clock.now()) > timedelta(days=2)
    now = clock.now()
    status = parse_fragment(r).select_one("#review-status[hx-swap-oob]")
    assert text(status) == (f"Answered. This card comes back {until(card.due, now)} "
                            f"({day_name(card.due, now)}). Nothing else is due now.")
    assert day_name(card.due, now) not in ("today", "tomorrow")
    assert until(card.due, now).startswith("in ")
    # The empty page says until when in words, never a bare timestamp.
    empty = text(parse(client.get("/review")).select_one(".empty-state"))
    assert empty == (f"Nothing is due until {day_name(card.due, now)}: your next card comes "
                     f"back {until(card.due, now)}.")
    assert str(card.due.year) not in empty or card.due.year != now.year
