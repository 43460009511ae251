"""Cases answered part by part and talk-throughs scored with their rubric: on the question page,
in a quiz, in a mock interview and through the API, with the order held by the server (real
SQLite, and PostgreSQL when configured)."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from fsrs import Rating
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.questions.bank import load_bank
from app.questions.schema import QuestionDoc
from app.quizzes.grading import MAX_TALK_BYTES, correct_answer
from app.quizzes.models import Attempt, PartialAnswer
from app.review.models import ReviewCard, ReviewLog
from tests.factories import (
    VARIANT_BANK,
    count,
    form_fields,
    htmx_headers,
    parse,
    parse_fragment,
    start_quiz,
    text,
)

CASE = "zero3-memory-case"
TALK = "step-time-doubled-talk"
API = "/api/v1/questions"
SCOPED = "Scope it across jobs, nodes and ranks first, then profile a slow rank and a healthy one."


def _case(variant: int) -> QuestionDoc:
    doc = next(q for q in load_bank(VARIANT_BANK).questions if q.slug == CASE)
    return doc.render(variant)


def _right(doc: QuestionDoc, j: int) -> str:
    key = correct_answer(doc.part(j))
    return f"{key:g}" if isinstance(key, float) else str(key)


def _post(client: TestClient, page: Any, data: dict[str, Any]) -> Any:
    action, hidden = form_fields(page, "form.answer-form")
    return client.post(action, data={**hidden, **data}, headers=htmx_headers(page))


def test_a_case_is_answered_part_by_part_and_a_later_part_is_refused_before_an_earlier_one(
    variant_client: TestClient, session_factory: sessionmaker[Session],
) -> None:
    page = parse(variant_client.get(f"/questions/{CASE}"))
    variant = int(page.select_one("form.answer-form input[name=variant]")["value"])
    doc = _case(variant)
    html = str(page)
    # The scenario and part 1 only; the later parts are counted, never sent.
    assert doc.prompt.split("\n")[0] in text(page.select_one(".prompt.scenario"))
    assert text(page.select_one(".case-part.current .part-heading")) == "Part 1 of 3"
    assert "ZeRO stage 3" in html
    assert "1 GB = 10⁹ bytes" not in html and "The job moves to" not in html
    assert [text(h) for h in page.select(".case-later .part-heading")] == ["Part 2 of 3", "Part 3 of 3"]

    # Part 2 before part 1 is refused, and nothing is stored.
    early = _post(variant_client, page, {"part": "1", "answer": _right(doc, 1)})
    assert early.status_code == 409
    assert "answer part 1 first" in text(parse_fragment(early).select_one(".notice"))
    assert count(session_factory, PartialAnswer) == 0

    one = _post(variant_client, page, {"part": "0", "answer": _right(doc, 0)})
    assert one.status_code == 200, one.text
    frag = parse_fragment(one)
    assert [text(h) for h in frag.select(".case-parts .part-heading")] == ["Part 1 of 3 · right"]
    assert "Stage 3 shards all three" in text(frag.select_one(".case-parts .part-explanation"))
    assert text(frag.select_one(".case-part.current .part-heading")) == "Part 2 of 3"
    assert frag.select_one(".case-part.current .part-heading").has_attr("autofocus")
    assert "1 GB = 10⁹ bytes" in one.text and "The job moves to" not in one.text
    # Part 1 again: answered already, the first answer counts.
    again = _post(variant_client, page, {"part": "0", "answer": "a"})
    assert again.status_code == 409
    with session_factory() as s:
        assert s.scalars(select(PartialAnswer.state)).one() == {"parts": [_right(doc, 0)]}

    # A reload carries on where the case stands.
    reloaded = parse(variant_client.get(f"/questions/{CASE}"))
    assert reloaded.select_one("form.answer-form input[name=part]")["value"] == "1"
    two = _post(variant_client, reloaded, {"part": "1", "answer": "1"})  # wrong
    assert two.status_code == 200
    frag = parse_fragment(two)
    assert [text(h) for h in frag.select(".case-parts .part-heading")] == [
        "Part 1 of 3 · right", "Part 2 of 3 · not quite"]
    assert count(session_factory, Attempt) == 0  # not finished, so no attempt yet

    last = _post(variant_client, frag, {"part": "2", "answer": _right(doc, 2)})
    assert last.status_code == 200
    graded = parse_fragment(last)
    assert text(graded.select_one("#verdict")) == "2 of 3 parts right · 67%"
    assert len(graded.select(".case-parts > li")) == 3
    assert "activations" in text(graded.select_one(".explanation:not(.part-explanation)"))
    with session_factory() as s:
        attempt = s.scalars(select(Attempt)).one()
        assert attempt.variant == variant
        assert attempt.answer == {"parts": [_right(doc, 0), 1.0, _right(doc, 2)]}
        assert abs(attempt.score - 2 / 3) < 1e-9 and attempt.correct is False
        assert s.scalar(select(ReviewCard.reps)) == 1  # one card for the whole case
        assert s.scalars(select(PartialAnswer)).all() == []


def test_a_case_through_the_api_reveals_each_part_after_the_one_before(
    variant_client: TestClient, session_factory: sessionmaker[Session],
) -> None:
    # The variant is the one the server drew for this learner.
    asked = variant_client.get(f"{API}/{CASE}").json()
    v = asked["variant"]
    assert (asked["answer_format"], asked["part_count"], asked["next_part"]) == ("case", 3, 0)
    assert [p["index"] for p in asked["parts"]] == [0]
    doc = _case(v)
    params = next(q for q in load_bank(VARIANT_BANK).questions if q.slug == CASE).variant_params(v)
    assert asked["prompt"] == doc.prompt
    assert f"{params['params_b']}B" in asked["prompt"] and f"{params['gpus']} GPUs" in asked["prompt"]

    early = variant_client.post(f"{API}/{CASE}/attempts",
                                json={"variant": v, "part": 1, "answer": 3.25})
    assert early.status_code == 409
    no_part = variant_client.post(f"{API}/{CASE}/attempts", json={"variant": v, "answer": "c"})
    assert no_part.status_code == 422
    whole = variant_client.post(f"{API}/{CASE}/attempts",
                                json={"variant": v, "answer": {"parts": ["c", 3.25, "c"]}})
    assert whole.status_code == 422  # one part at a time

    step = variant_client.post(f"{API}/{CASE}/attempts", json={"variant": v, "part": 0, "answer": "c"})
    assert step.status_code == 200
    body = step.json()
    assert (body["complete"], body["attempt_id"], body["score"]) == (False, None, None)
    assert body["part"]["correct"] and body["part"]["correct_answer"] == "c"
    assert body["next_part"]["index"] == 1 and "10⁹" in body["next_part"]["prompt"]
    # Another variant cannot be mixed in while this one is under way.
    other = variant_client.post(f"{API}/{CASE}/attempts",
                                json={"variant": (v + 1) % 4, "part": 1, "answer": 1})
    assert other.status_code == 409
    assert [p["index"] for p in variant_client.get(f"{API}/{CASE}").json()["parts"]] == [0, 1]

    mem = 16 * params["params_b"] / params["gpus"]
    step = variant_client.post(f"{API}/{CASE}/attempts", json={"variant": v, "part": 1, "answer": mem})
    assert step.json()["part"]["correct"] and step.json()["next_part"]["index"] == 2
    done = variant_client.post(f"{API}/{CASE}/attempts", json={"variant": v, "part": 2, "answer": "a"})
    assert done.status_code == 200
    out = done.json()
    assert out["complete"] and out["attempt_id"] is not None
    assert abs(out["score"] - 2 / 3) < 1e-9 and out["correct"] is False
    assert [p["correct"] for p in out["parts"]] == [True, True, False]
    assert out["correct_answer"] == {"parts": ["c", mem, "c"]}
    assert out["explanation"].startswith("Sharding divides")
    with session_factory() as s:
        assert s.scalar(select(Attempt.variant)) == v


def test_a_talk_through_is_written_then_scored_with_its_rubric(
    variant_client: TestClient, session_factory: sessionmaker[Session],
) -> None:
    page = parse(variant_client.get(f"/questions/{TALK}"))
    html = str(page)
    assert page.select_one("textarea[name=text]") is not None
    assert "Scopes the problem" not in html and "pin the job to yesterday" not in html
    assert variant_client.get(f"{API}/{TALK}").json()["model_answer"] is None

    written = "Roll back first, then compare per-rank step times and diff the image and nodes."
    step = _post(variant_client, page, {"text": written})
    assert step.status_code == 200
    frag = parse_fragment(step)
    assert text(frag.select_one(".talk-text")) == written
    assert "pin the job to yesterday" in text(frag.select_one(".model-answer"))
    moves = frag.select("input[name=ticked]")
    assert len(moves) == 6 and frag.select_one("#talk-yours-h").has_attr("autofocus")
    # Writing again is out of turn; the rubric is what comes next.
    assert _post(variant_client, page, {"text": "something else"}).status_code == 409

    scored = _post(variant_client, frag, {"ticked": ["0", "2", "3"]})
    assert scored.status_code == 200
    graded = parse_fragment(scored)
    assert text(graded.select_one("#verdict")) == "3 of 6 moves · 50%"
    assert len(graded.select(".rubric-graded li.correct")) == 3
    with session_factory() as s:
        attempt = s.scalars(select(Attempt)).one()
        assert attempt.answer == {"text": written, "ticked": [0, 2, 3]}
        assert (attempt.score, attempt.correct) == (0.5, False)
        # The self-score feeds review like any answer: a half-made answer is Hard.
        assert s.scalar(select(ReviewLog.rating)) == int(Rating.Hard)


def test_a_talk_through_through_the_api_takes_the_text_then_the_ticks(
    variant_client: TestClient, session_factory: sessionmaker[Session],
) -> None:
    url = f"{API}/{TALK}/attempts"
    assert variant_client.post(url, json={"answer": {"ticked": [0]}}).status_code == 409
    too_long = variant_client.post(url, json={"answer": {"text": "x" * (MAX_TALK_BYTES + 1)}})
    assert too_long.status_code == 422 and "8 KB" in too_long.text
    both = variant_client.post(url, json={"answer": {"text": "a", "ticked": [0]}})
    assert both.status_code == 409
    first = variant_client.post(url, json={"answer": {"text": SCOPED}})
    body = first.json()
    assert first.status_code == 200 and body["complete"] is False
    assert len(body["rubric"]) == 6 and body["model_answer"].startswith("First keep")
    assert variant_client.get(f"{API}/{TALK}").json()["written_text"] == SCOPED
    assert variant_client.post(url, json={"answer": {"ticked": [9]}}).status_code == 422
    done = variant_client.post(url, json={"answer": {"ticked": [0, 1, 2, 3, 4]}})
    out = done.json()
    assert (out["score"], out["correct"], out["ticked"]) == (5 / 6, True, [0, 1, 2, 3, 4])
    with session_factory() as s:
        assert s.scalar(select(ReviewLog.rating)) == int(Rating.Good)


def test_a_case_in_a_quiz_is_one_item_answered_part_by_part(
    variant_client: TestClient, session_factory: sessionmaker[Session],
) -> None:
    url = start_quiz(variant_client, topics="interview", count="2", types=["case"])
    page = parse(variant_client.get(url))
    variant = int(page.select_one("form.answer-form input[name=variant]")["value"])
    doc = _case(variant)
    assert text(page.select_one(".quiz-progress")).startswith("Question 1 of 1")
    for j in range(3):
        r = _post(variant_client, page, {"part": str(j), "answer": _right(doc, j)})
        assert r.status_code == 200, r.text
        page = parse_fragment(r)
    assert text(page.select_one("#verdict")) == "Right: every part · 100%"
    with session_factory() as s:
        attempt = s.scalars(select(Attempt)).one()
        assert attempt.quiz_item_id is not None and attempt.variant == variant
    summary = parse(variant_client.get(url.rsplit("/", 1)[0] + "/summary"))
    assert text(summary.select_one(".score-line")).startswith("1 of 1 question right · 100%")
