"""Variants in the learning loop: which one a learner meets, what the page and the API show of it,
and that an attempt is graded against its own variant's key for good (real SQLite, and
PostgreSQL when configured)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.questions.bank import load_bank
from app.questions.schema import QuestionDoc
from app.quizzes.models import Attempt, QuizItem
from app.quizzes.service import pick_variant
from app.reports.models import ProblemReport
from tests.factories import (
    VARIANT_BANK,
    copy_bank,
    form_fields,
    htmx_headers,
    import_folder,
    parse,
    parse_fragment,
    sign_up,
    start_quiz,
)

SLUG = "ring-send-volume"
API = "/api/v1/questions"


def _bank_doc(slug: str, bank: Path = VARIANT_BANK) -> QuestionDoc:
    return next(q for q in load_bank(bank).questions if q.slug == slug)


def _key(slug: str, variant: int, bank: Path = VARIANT_BANK) -> float:
    value = _bank_doc(slug, bank).render(variant).answer
    assert value is not None and value.value is not None
    return value.value


def _shown_variant(page: Any) -> int:
    field = page.select_one("form.answer-form input[name=variant]")
    assert field is not None
    return int(field["value"])


def _edited_bank(tmp_path: Path) -> Path:
    """The variant bank with ring-send-volume's formula doubled: every variant keeps its index
    and its numbers, and gets another key."""
    bank = copy_bank(tmp_path / "edited", VARIANT_BANK)
    path = bank / "sizing" / f"{SLUG}.yaml"
    lines = path.read_text().splitlines(keepends=True)
    [at] = [i for i, line in enumerate(lines) if line.startswith("  per_rank_mb: ")]
    lines[at] = "  per_rank_mb: 2 * (" + lines[at].split(": ", 1)[1].rstrip("\n") + ")\n"
    path.write_text("".join(lines))
    return bank


def _drawn(client: TestClient) -> int:
    return int(client.get(f"{API}/{SLUG}").json()["variant"])


def test_an_attempt_is_graded_against_its_own_variants_key_even_after_the_question_changes(
    variant_client: TestClient, session_factory: sessionmaker[Session], tmp_path: Path,
) -> None:
    v = _drawn(variant_client)
    key = _key(SLUG, v)
    first = variant_client.post(f"{API}/{SLUG}/attempts", json={"answer": key, "variant": v},
                                headers={"Idempotency-Key": "first"})
    assert first.status_code == 200, first.text
    body = first.json()
    assert (body["variant"], body["correct"], body["correct_answer"]) == (v, True, key)
    assert f"{key:,.0f}" in body["explanation"]  # the variant's own working, not the template
    # The next draw is another variant, graded against its own key.
    w = _drawn(variant_client)
    assert w != v
    wrong = variant_client.post(f"{API}/{SLUG}/attempts", json={"answer": key * 3, "variant": w})
    assert wrong.json()["correct"] is False and wrong.json()["correct_answer"] == _key(SLUG, w)

    # A quiz pins the revision and its variant when it starts.
    quiz_url = start_quiz(variant_client, topics="sizing", count="1")
    quiz_page = parse(variant_client.get(quiz_url))
    pinned = _shown_variant(quiz_page)
    pinned_key = _key(SLUG, pinned)

    edited = _edited_bank(tmp_path)
    assert import_folder(session_factory, edited).updated == [SLUG]
    assert _key(SLUG, v, edited) == 2 * key

    # The stored attempt still answers revision 1's variant: replayed, it comes back graded
    # against its key then, whatever the question says now.
    replay = variant_client.post(f"{API}/{SLUG}/attempts", json={"answer": key, "variant": v},
                                 headers={"Idempotency-Key": "first"})
    assert replay.status_code == 409
    assert (replay.json()["correct"], replay.json()["correct_answer"], replay.json()["variant"]) == (
        True, key, v)
    # The quiz grades its pinned variant of the revision it started on.
    action, hidden = form_fields(quiz_page, "form.answer-form")
    graded = variant_client.post(action, data={**hidden, "answer": f"{pinned_key:g}"},
                                 headers=htmx_headers(quiz_page))
    assert graded.status_code == 200, graded.text
    assert parse(graded).select_one("#verdict").get_text(strip=True) == "Right"
    # A new attempt now meets the edited question's key.
    x = _drawn(variant_client)
    now = variant_client.post(f"{API}/{SLUG}/attempts", json={"answer": _key(SLUG, x), "variant": x})
    assert (now.json()["correct"], now.json()["correct_answer"]) == (False, 2 * _key(SLUG, x))

    with session_factory() as s:
        rows = s.execute(select(Attempt.variant, Attempt.correct, Attempt.revision_id)
                         .order_by(Attempt.id)).all()
    assert [(v_, c) for v_, c, _ in rows] == [(v, True), (w, False), (pinned, True), (x, False)]
    assert len({r for *_, r in rows[:3]}) == 1 and rows[3][2] != rows[0][2]


def test_the_api_returns_the_variants_prompt_and_never_its_key_before_answering(
    variant_client: TestClient,
) -> None:
    doc = _bank_doc(SLUG)
    for i in range(doc.variant_count):
        rendered = doc.render(i)
        data = variant_client.get(f"{API}/{SLUG}", params={"variant": i}).json()
        assert (data["variant"], data["variant_count"]) == (i, 8)
        assert data["prompt"] == rendered.prompt
        assert "{{" not in data["prompt"]
        assert not [k for k in _keys(data) if re.search(r"correct|explanation|formula|answer_key", k)]
        assert rendered.explanation.splitlines()[0] not in str(data)
    # Without `variant`, the API gives the variant the question page shows this learner.
    page_variant = _shown_variant(parse(variant_client.get(f"/questions/{SLUG}")))
    assert variant_client.get(f"{API}/{SLUG}").json()["variant"] == page_variant
    # A variant the question does not have is a 422 on reading and on answering.
    for bad in (8, 99):
        assert variant_client.get(f"{API}/{SLUG}", params={"variant": bad}).status_code == 422
        r = variant_client.post(f"{API}/{SLUG}/attempts", json={"answer": 1, "variant": bad})
        assert r.status_code == 422 and "variant" in r.text
    assert variant_client.get(f"{API}/{SLUG}", params={"variant": -1}).status_code == 422
    # A question without variables has exactly variant 0.
    assert variant_client.post(f"{API}/zero3-memory-case/attempts",
                               json={"answer": "c", "part": 0, "variant": 4}).status_code == 422


def _keys(data: Any) -> list[str]:
    if isinstance(data, dict):
        return [str(k) for k in data] + [k for v in data.values() for k in _keys(v)]
    if isinstance(data, list):
        return [k for v in data for k in _keys(v)]
    return []


def test_a_learner_keeps_their_numbers_on_reload_and_learners_draw_differently(
    variant_client: TestClient, new_client: Any,
) -> None:
    shown = [_shown_variant(parse(variant_client.get(f"/questions/{SLUG}"))) for _ in range(3)]
    assert len(set(shown)) == 1
    prompts = {parse(variant_client.get(f"/questions/{SLUG}")).select_one(".prompt").get_text()}
    assert len(prompts) == 1 and "{{" not in next(iter(prompts))
    # Eight variants: over a dozen learners, more than one is drawn (each draw is a hash).
    drawn = {_shown_variant(parse(new_client().get(f"/questions/{SLUG}"))) for _ in range(12)}
    assert len(drawn) > 1


def test_pick_variant_is_deterministic_and_moves_off_the_last_answered_variant() -> None:
    draws = [pick_variant(learner_id=f"learner-{n}", question_id=7, count=8, answered=0, last=None)
             for n in range(200)]
    assert set(draws) == set(range(8))
    assert draws == [pick_variant(learner_id=f"learner-{n}", question_id=7, count=8, answered=0,
                                  last=None) for n in range(200)]
    for n in range(200):
        for last in range(8):
            again = pick_variant(learner_id=f"learner-{n}", question_id=7, count=8, answered=3,
                                 last=last)
            assert again != last and 0 <= again < 8
    assert pick_variant(learner_id="x", question_id=1, count=1, answered=5, last=0) == 0


def test_after_an_answer_the_page_shows_another_variant(variant_client: TestClient) -> None:
    page = parse(variant_client.get(f"/questions/{SLUG}"))
    first = _shown_variant(page)
    action, hidden = form_fields(page, "form.answer-form")
    r = variant_client.post(action, data={**hidden, "answer": f"{_key(SLUG, first):g}"},
                            headers=htmx_headers(page))
    graded = parse(r)
    assert graded.select_one("#verdict").get_text(strip=True) == "Right"
    # The graded fragment names the variant answered on its report form.
    assert graded.select_one("#report-problem input[name=variant]")["value"] == str(first)
    again = _shown_variant(parse(variant_client.get(f"/questions/{SLUG}")))
    assert again != first


def test_a_quiz_pins_a_variant_for_each_item_at_start(
    variant_client: TestClient, session_factory: sessionmaker[Session],
) -> None:
    url = start_quiz(variant_client, topics="sizing", count="1")
    pinned = _shown_variant(parse(variant_client.get(url)))
    with session_factory() as s:
        item = s.scalars(select(QuizItem)).one()
    assert item.variant == pinned
    # Answering elsewhere meanwhile does not move the quiz's numbers.
    variant_client.post(f"{API}/{SLUG}/attempts", json={"answer": 1, "variant": pinned})
    assert _shown_variant(parse(variant_client.get(url))) == pinned


def test_a_problem_report_and_the_data_export_name_the_variant(
    variant_client: TestClient, session_factory: sessionmaker[Session],
) -> None:
    assert sign_up(variant_client, "varia").status_code == 303
    page = parse(variant_client.get(f"/questions/{SLUG}"))
    shown = _shown_variant(page)
    action, hidden = form_fields(page, "form.answer-form")
    graded = parse(variant_client.post(action, data={**hidden, "answer": "1"},
                                       headers=htmx_headers(page)))
    report_action, report_hidden = form_fields(graded, "form.report-form")
    assert report_hidden["variant"] == str(shown)
    filed = variant_client.post(report_action, data={**report_hidden, "kind": "unclear",
                                                     "comment": "which chunks?"},
                                headers=htmx_headers(page))
    assert filed.status_code == 200, filed.text
    with session_factory() as s:
        assert s.scalar(select(ProblemReport.variant)) == shown
    # The API names it too, and refuses nothing it cannot place (an unknown variant is 0).
    api = variant_client.post(f"{API}/{SLUG}/reports", json={"kind": "other", "variant": 5})
    assert api.status_code == 201 and api.json()["variant"] == 5
    # A case begun but not finished is in the export too, with its variant.
    variant_client.post(f"{API}/zero3-memory-case/attempts", json={"answer": "c", "part": 0})
    data = variant_client.get("/account/export.json").json()
    assert [(a["question"], a["variant"]) for a in data["attempts"]] == [(SLUG, shown)]
    assert sorted(r["variant"] for r in data["problem_reports"]) == sorted([shown, 5])
    [under_way] = data["answers_in_progress"]
    assert under_way["question"] == "zero3-memory-case" and under_way["answer"] == {"parts": ["c"]}
    assert isinstance(under_way["variant"], int)


def test_verify_after_answering_in_a_quiz_runs_the_variant_the_quiz_pinned(
    variant_client: TestClient, new_client: Callable[..., TestClient],
) -> None:
    """The graded fragment swaps in the Verify panel: its form carries the item's variant (it
    carried 0, and Verify was then refused as an unanswered variant, or ran other numbers)."""
    for _ in range(12):
        learner = new_client()  # learners draw their own numbers
        url = start_quiz(learner, topics="measured", count="1")
        page = parse(learner.get(url))
        pinned = _shown_variant(page)
        if pinned:
            break
    assert pinned, "no quiz drew a variant other than the first"
    action, hidden = form_fields(page, "form#answer-form")
    graded = parse_fragment(learner.post(action, data={**hidden, "answer": "1"},
                                         headers=htmx_headers(page)))
    form = graded.select_one("#verify-panel form#verify-form")
    assert form is not None and form.select_one("input[name=variant]")["value"] == str(pinned)
    data = {i["name"]: i.get("value", "") for i in form.select("input[type=hidden]")}
    run = learner.post(form["action"], data=data, headers=htmx_headers(page))
    assert run.status_code == 200, run.text
