"""Review and mock interviews with variants, cases and talk-throughs: review draws other numbers
than the ones last answered, a case is one card, a mock interview pins its own variants and
gives no feedback before its report (real SQLite, and PostgreSQL when configured)."""

from __future__ import annotations

import shutil
from datetime import timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.clock import FixedClock
from app.questions.bank import load_bank
from app.questions.models import Question
from app.quizzes.grading import correct_answer
from app.quizzes.models import Attempt, QuizItem
from app.review.models import ReviewCard
from tests.factories import (
    TESTS,
    VARIANT_BANK,
    copy_bank,
    count,
    form_fields,
    import_folder,
    parse,
    text,
)

RING = "ring-send-volume"
CASE = "zero3-memory-case"
DOCS = {q.slug: q for q in load_bank(VARIANT_BANK).questions}


def _variant(page: Any) -> int:
    return int(page.select_one("form.answer-form input[name=variant]")["value"])


def _clock(client: TestClient) -> FixedClock:
    clock = client.app.state.clock  # type: ignore[attr-defined]
    assert isinstance(clock, FixedClock)
    return clock


def _answer_ring(client: TestClient, page_url: str, right: bool = True) -> int:
    page = parse(client.get(page_url))
    variant = _variant(page)
    key = DOCS[RING].render(variant).answer
    assert key is not None and key.value is not None
    action, hidden = form_fields(page, "form.answer-form")
    value = f"{key.value:g}" if right else "1"
    r = client.post(action, data={**hidden, "answer": value}, follow_redirects=False)
    assert r.status_code == 200, r.text
    return variant


def test_review_shows_another_variant_than_the_one_last_answered(
    variant_client: TestClient, session_factory: sessionmaker[Session],
) -> None:
    clock = _clock(variant_client)
    answered = [_answer_ring(variant_client, f"/questions/{RING}", right=False)]
    for _ in range(4):
        clock.advance(timedelta(days=30))
        queue = variant_client.get("/api/v1/review/queue").json()
        [card] = queue["cards"]
        assert card["slug"] == RING and card["variant"] != answered[-1]
        assert card["prompt"] == DOCS[RING].render(card["variant"]).prompt
        page = parse(variant_client.get("/review"))
        assert _variant(page) == card["variant"]
        # Counted from 1 on the page (the API's variant is the stored position).
        assert text(page.select_one(".variant-note")).startswith(
            f"Your numbers: variant {card['variant'] + 1} of 8")
        answered.append(_answer_ring(variant_client, "/review", right=False))
        assert answered[-1] == card["variant"]
    assert all(a != b for a, b in pairwise(answered))
    with session_factory() as s:
        assert list(s.scalars(select(Attempt.variant).order_by(Attempt.id))) == answered
        assert s.scalar(select(ReviewCard.reps)) == len(answered)  # one card throughout


def test_a_case_under_review_is_one_card_answered_part_by_part(
    variant_client: TestClient, session_factory: sessionmaker[Session],
) -> None:
    clock = _clock(variant_client)
    url = "/api/v1/questions/zero3-memory-case/attempts"
    first = variant_client.get("/api/v1/questions/zero3-memory-case").json()["variant"]
    for j, answer in enumerate(["a", 1.0, "a"]):  # every part wrong: due again soon
        r = variant_client.post(url, json={"variant": first, "part": j, "answer": answer})
        assert r.status_code == 200, r.text
    clock.advance(timedelta(days=2))
    page = parse(variant_client.get("/review"))
    variant = _variant(page)
    assert variant != first
    assert text(page.select_one(".case-part.current .part-heading")) == "Part 1 of 3"
    doc = DOCS[CASE].render(variant)
    for j in range(3):
        key = correct_answer(doc.part(j))
        action, hidden = form_fields(page, "form.answer-form")
        r = variant_client.post(action, data={**hidden, "answer": f"{key:g}" if isinstance(key, float)
                                              else key})
        assert r.status_code == 200
        page = parse(r)
    assert text(page.select_one("#verdict")) == "Right: every part · 100%"
    with session_factory() as s:
        assert s.scalar(select(ReviewCard.reps)) == 2
        assert list(s.scalars(select(Attempt.variant).order_by(Attempt.id))) == [first, variant]


def test_a_mock_interview_pins_variants_and_asks_a_case_without_feedback_until_the_report(
    variant_client: TestClient, session_factory: sessionmaker[Session],
) -> None:
    start = parse(variant_client.get("/mock"))
    action, hidden = form_fields(start, "form[action='/mock']")
    r = variant_client.post(action, data={**hidden, "minutes": "25"}, follow_redirects=False)
    assert r.status_code == 303
    mock_url = r.headers["location"]
    mock_id = mock_url.rsplit("/", 1)[1]
    with session_factory() as s:
        pinned = dict(s.execute(select(QuizItem.position, QuizItem.variant)).all())
    api = variant_client.get(f"/api/v1/mock-interviews/{mock_id}").json()
    assert {i["position"]: i["variant"] for i in api["items"]} == pinned
    for item in api["items"]:
        asked = item["asked"]
        assert asked["variant"] == item["variant"]
        assert asked["prompt"] == DOCS[item["slug"]].render(item["variant"]).prompt
    for _ in range(12):
        page = parse(variant_client.get(mock_url))
        if page.select_one("form.answer-form") is None:
            break
        slug = page.select_one("article.question")["data-slug"]
        action, hidden = form_fields(page, "form.answer-form")
        data: dict[str, Any] = dict(hidden)
        if "part" in hidden:
            # No grade between the parts: the part answered shows only what was said.
            data["answer"] = "a" if hidden["part"] != "1" else "1"
        elif hidden.get("step") == "text":
            data["text"] = ("I would pin the last good image first, then compare per-rank step "
                            "times and diff what changed.")
        elif hidden.get("step") == "ticks":
            data["ticked"] = ["0"]
        else:
            data["answer"] = "1"
        r = variant_client.post(action, data=data, follow_redirects=False)
        assert r.status_code == 303, (slug, r.text)
        after = variant_client.get(mock_url, follow_redirects=False)
        if after.status_code == 200:  # still asking (the last answer leads to the report)
            assert parse(after).select(".case-part .part-verdict, .choices-graded, "
                                       "section.graded") == []
    report = variant_client.get(f"{mock_url}/report")
    assert report.status_code == 200
    soup = parse(report)
    misses = {text(m.select_one("h3")): m for m in soup.select("article.miss")}
    case_miss = next(m for title, m in misses.items() if "Sizing a fully sharded run" in title)
    assert len(case_miss.select(".case-parts > li")) == 3
    with session_factory() as s:
        assert count(session_factory, Attempt) == 4
        assert dict(s.execute(select(QuizItem.position, Attempt.variant)
                              .join(Attempt, Attempt.quiz_item_id == QuizItem.id)).all()) == pinned
    report_api = variant_client.get(f"/api/v1/mock-interviews/{mock_id}/report").json()
    assert {i["position"]: i["variant"] for i in report_api["items"]} == pinned


def test_a_mock_interview_never_asks_an_exercise(
    variant_client: TestClient, session_factory: sessionmaker[Session], tmp_path: Path,
) -> None:
    """An exercise is answered by running code on its own page, not with the interview's form."""
    both = copy_bank(tmp_path / "bank", VARIANT_BANK)
    shutil.copytree(TESTS / "fixtures" / "exercise_bank" / "drills", both / "drills")
    import_folder(session_factory, both)
    start = parse(variant_client.get("/mock"))
    action, hidden = form_fields(start, "form[action='/mock']")
    assert variant_client.post(action, data={**hidden, "minutes": "25"},
                               follow_redirects=False).status_code == 303
    with session_factory() as s:
        types = list(s.scalars(select(Question.type).join(QuizItem, QuizItem.question_id == Question.id)))
        assert s.scalar(select(Question.id).where(Question.type == "exercise")) is not None
    assert types and "exercise" not in types
