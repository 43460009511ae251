"""A case whose second part follows the first part's choice, answered as learners answer it:
through the API and on the question page (real SQLite, and PostgreSQL when configured). The
version asked is the one the learner's pick led to, the other version's text is never sent,
and the key shown afterwards follows the learner's path."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.clock import FixedClock
from app.questions.bank import load_bank
from app.questions.schema import QuestionDoc
from app.quizzes.models import Attempt
from tests.factories import T0, TESTS, form_fields, htmx_headers, import_folder, parse, parse_fragment, text

BRANCHING_BANK = TESTS / "fixtures" / "branching_bank"
SLUG = "tp-placement-branch-case"
API = "/api/v1/questions"


@pytest.fixture
def branching_client(app_client: TestClient, session_factory: sessionmaker[Session]) -> TestClient:
    import_folder(session_factory, BRANCHING_BANK)
    app_client.app.state.clock = FixedClock(T0)  # type: ignore[attr-defined]
    return app_client


def _case(variant: int) -> QuestionDoc:
    (doc,) = load_bank(BRANCHING_BANK).questions
    return doc.render(variant)


def _post(client: TestClient, page: Any, data: dict[str, Any]) -> Any:
    action, hidden = form_fields(page, "form.answer-form")
    return client.post(action, data={**hidden, **data}, headers=htmx_headers(page))


def test_through_the_api_the_next_part_is_the_version_the_choice_picked(
    branching_client: TestClient, session_factory: sessionmaker[Session],
) -> None:
    asked = branching_client.get(f"{API}/{SLUG}").json()
    v = asked["variant"]
    doc = _case(v)
    inside, across = (doc.part(1, [k]) for k in ("a", "b"))
    assert (asked["part_count"], [p["index"] for p in asked["parts"]]) == (3, [0])
    assert inside.prompt not in str(asked) and across.prompt not in str(asked)

    url = f"{API}/{SLUG}/attempts"
    step = branching_client.post(url, json={"variant": v, "part": 0, "answer": "b"}).json()
    assert step["part"]["correct"] is False and step["part"]["correct_answer"] == "a"
    assert step["next_part"]["index"] == 1 and step["next_part"]["prompt"] == across.prompt
    assert inside.prompt not in str(step)
    # Asked again, the question carries the same version of part 2.
    again = branching_client.get(f"{API}/{SLUG}").json()
    assert [p["prompt"] for p in again["parts"]][1] == across.prompt

    assert across.answer is not None and across.answer.value is not None
    right_for_b = across.answer.value
    step = branching_client.post(url, json={"variant": v, "part": 1, "answer": right_for_b}).json()
    assert step["part"]["correct"] is True and step["part"]["correct_answer"] == right_for_b
    assert step["part"]["explanation"] == across.explanation
    done = branching_client.post(url, json={"variant": v, "part": 2, "answer": "a"}).json()
    assert done["complete"] is True
    assert [p["correct"] for p in done["parts"]] == [False, True, True]
    assert done["correct_answer"] == {"parts": ["a", right_for_b, "a"]}
    assert abs(done["score"] - 2 / 3) < 1e-9 and done["correct"] is False
    with session_factory() as s:
        assert s.scalars(select(Attempt.answer)).one() == {"parts": ["b", right_for_b, "a"]}


def test_on_the_page_the_part_that_follows_says_so_and_shows_only_its_version(
    branching_client: TestClient, session_factory: sessionmaker[Session],
) -> None:
    page = parse(branching_client.get(f"/questions/{SLUG}"))
    v = int(page.select_one("form.answer-form input[name=variant]")["value"])
    doc = _case(v)
    inside, across = (doc.part(1, [k]) for k in ("a", "b"))
    assert page.select_one(".part-follows") is None

    one = _post(branching_client, page, {"part": "0", "answer": "a"})
    assert one.status_code == 200, one.text
    frag = parse_fragment(one)
    assert text(frag.select_one(".case-part.current .part-heading")) == "Part 2 of 3"
    assert text(frag.select_one(".case-part.current .part-follows")) == (
        "This part follows your answer to part 1.")
    assert text(frag.select_one(".case-part.current .part-prompt")) == inside.prompt
    assert across.prompt not in one.text

    two = _post(branching_client, frag, {"part": "1", "answer": "1"})  # wrong for this version
    frag = parse_fragment(two)
    assert [text(h) for h in frag.select(".case-parts .part-heading")] == [
        "Part 1 of 3 · right", "Part 2 of 3 · not quite"]
    last = _post(branching_client, frag, {"part": "2", "answer": "a"})
    graded = parse_fragment(last)
    assert text(graded.select_one("#verdict")) == "2 of 3 parts right · 67%"
    answered = graded.select(".case-parts > li")
    assert text(answered[1].select_one(".part-follows")) == "This part followed your answer to part 1."
    assert text(answered[1].select_one(".part-explanation")) == inside.explanation
    assert across.prompt not in last.text
    with session_factory() as s:
        assert s.scalars(select(Attempt.answer)).one() == {"parts": ["a", 1.0, "a"]}
