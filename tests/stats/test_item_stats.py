"""Item statistics on a planted dataset: forty learners of known ability answer the fixture
bank, and on one question the strong learners choose a distractor. The numbers are checked
against a plain computation of the same definitions, and the flags, pages and API against them."""

from __future__ import annotations

import statistics
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.accounts.models import Learner
from app.db import session_scope
from app.questions.models import Question, QuestionRevision
from app.quizzes.models import Attempt
from app.stats import service as stats
from tests.factories import T0, parse, text

LEARNERS = 40


@dataclass(frozen=True)
class First:
    learner: str
    slug: str
    revision: int  # 1 or 2
    correct: bool
    answer: Any
    ms: int
    confidence: str | None


def _plan(learners: list[str]) -> list[First]:
    """Each learner's first attempt at every fixture question. Learner i has ability i/39:
    on every question but one the abler are right; on fixture-single the abler half picks the
    distractor a, the rest the key b, and nobody picks c. fixture-trace-join everyone gets
    right. Half the learners met fixture-numeric at its second revision."""
    out = []
    for i, lid in enumerate(learners):
        ability = i / (LEARNERS - 1)
        ms = 8_000 + 1_000 * i
        sure = "sure" if ability >= 0.5 else ("unsure" if i % 2 else None)
        strong = ability >= 0.5
        out.append(First(lid, "fixture-single", 1, not strong, "a" if strong else "b", ms, sure))
        right = ability > 0.3
        out.append(First(lid, "fixture-multi", 1, right, ["a", "b"] if right else [["c"], ["d"]][i % 2],
                         ms, sure))
        fast = ability > 0.45
        out.append(First(lid, "fixture-numeric", 1 + i % 2, fast, 1400.0 if fast else 1000.0, ms, sure))
        out.append(First(lid, "fixture-trace-join", 1, True, "a", ms, sure))
        out.append(First(lid, "fixture-trace-buckets", 1, ability > 0.6,
                         4.0 if ability > 0.6 else 11.0, ms, sure))
    return out


@pytest.fixture
def planted(loaded: None, session_factory: sessionmaker[Session]) -> list[First]:
    learners = [str(uuid.uuid4()) for _ in range(LEARNERS)]
    firsts = _plan(learners)
    with session_scope(session_factory) as s:
        s.add_all(Learner(id=lid) for lid in learners)
        questions = {q.slug: q for q in s.scalars(select(Question))}
        numeric = questions["fixture-numeric"]
        current = s.get(QuestionRevision, numeric.current_revision_id)
        assert current is not None
        second = QuestionRevision(question_id=numeric.id, number=2, content=current.content,
                                  snippet_text=current.snippet_text,
                                  content_hash=current.content_hash, note="second")
        s.add(second)
        s.flush()
        for n, f in enumerate(firsts):
            q = questions[f.slug]
            rev = second.id if f.revision == 2 else q.current_revision_id
            at = T0 + timedelta(minutes=n)
            s.add(Attempt(learner_id=f.learner, question_id=q.id, revision_id=rev, answer=f.answer,
                          score=1.0 if f.correct else 0.0, correct=f.correct, time_taken_ms=f.ms,
                          confidence=f.confidence, created_at=at))
            # Every later attempt is a second look: it must change none of the numbers.
            s.add(Attempt(learner_id=f.learner, question_id=q.id, revision_id=rev, answer="c",
                          score=0.0, correct=not f.correct, time_taken_ms=999_999,
                          confidence="guessing", created_at=at + timedelta(days=3)))
    return firsts


def _expected(firsts: list[First], slug: str, revision: int = 1) -> dict[str, Any]:
    """The definitions of app/stats/service.py, computed plainly."""
    by_learner: dict[str, list[First]] = {}
    for f in firsts:
        by_learner.setdefault(f.learner, []).append(f)
    item = [f for f in firsts if f.slug == slug and f.revision == revision]
    xs, rests = [], []
    for f in item:
        others = [o for o in by_learner[f.learner] if o.slug != slug]
        if len(others) >= stats.MIN_OTHER_ITEMS:
            xs.append(1.0 if f.correct else 0.0)
            rests.append(sum(o.correct for o in others) / len(others))
    r = float(np.corrcoef(xs, rests)[0, 1]) if len(set(xs)) > 1 else None
    return {"attempts": len(item), "facility": sum(f.correct for f in item) / len(item),
            "discrimination": r, "median_ms": statistics.median(f.ms for f in item)}


def _by_key(items: list[stats.ItemStats]) -> dict[tuple[str, int], stats.ItemStats]:
    return {(s.slug, s.revision_number): s for s in items}


def test_item_statistics_match_their_definitions_on_first_attempts_only(
    planted: list[First], session_factory: sessionmaker[Session],
) -> None:
    with session_factory() as s:
        items = _by_key(stats.item_stats(db_session=s))
    assert set(items) == {("fixture-single", 1), ("fixture-multi", 1), ("fixture-numeric", 1),
                          ("fixture-numeric", 2), ("fixture-trace-join", 1), ("fixture-trace-buckets", 1)}
    for (slug, rev), item in items.items():
        want = _expected(planted, slug, rev)
        assert item.variant is None  # no variables: one form, no variant to name
        assert item.attempts == want["attempts"], slug
        assert item.facility == pytest.approx(want["facility"]), slug
        assert item.median_ms == pytest.approx(want["median_ms"]), slug
        if want["discrimination"] is None:
            assert item.discrimination is None, slug
        else:
            assert item.discrimination == pytest.approx(want["discrimination"]), slug
    single = items[("fixture-single", 1)]
    assert single.discrimination is not None and single.discrimination < -0.5
    for k in (("fixture-multi", 1), ("fixture-trace-buckets", 1)):
        assert (items[k].discrimination or 0) > stats.DISCRIMINATION_FLOOR, (k, items[k].discrimination)
    assert {c.key: c.picks for c in single.choices} == {"a": 20, "b": 20, "c": 0}
    assert [c.correct for c in single.choices] == [False, True, False]
    multi = items[("fixture-multi", 1)]
    assert {c.key: c.picks for c in multi.choices} == {"a": 28, "b": 28, "c": 6, "d": 6}
    assert items[("fixture-numeric", 1)].choices == []
    # Confidence against correctness: the sure are the strong learners, wrong on fixture-single.
    assert single.confidence["sure"] == (0, 20)
    assert single.confidence["unsure"][1] == 0 and "guessing" not in single.confidence


def test_the_distractor_the_strong_learners_choose_is_flagged_with_its_negative_discrimination(
    planted: list[First], session_factory: sessionmaker[Session],
) -> None:
    with session_factory() as s:
        items = _by_key(stats.item_stats(db_session=s))
        flagged = {(f.slug, f.revision_number): f.flags for f in stats.flagged(db_session=s)}
    assert flagged[("fixture-single", 1)] == [stats.FLAG_DISCRIMINATION, stats.FLAG_UNPICKED]
    # Everyone is right: too easy, and so none of its distractors is ever picked.
    assert flagged[("fixture-trace-join", 1)] == [stats.FLAG_UNPICKED, stats.FLAG_EASY]
    # Discriminating well and every distractor picked: nothing to say.
    assert ("fixture-multi", 1) not in flagged and ("fixture-trace-buckets", 1) not in flagged
    # Each revision of fixture-numeric has 20 first attempts: too few to judge.
    assert items[("fixture-numeric", 1)].attempts == 20 < stats.MIN_ATTEMPTS
    assert ("fixture-numeric", 1) not in flagged and ("fixture-numeric", 2) not in flagged


def test_the_inbox_and_the_stats_pages_show_the_flag_with_its_numbers(
    planted: list[First], admin_client: TestClient,
) -> None:
    # The inbox loads the flags after itself (they aggregate the whole bank).
    inbox = parse(admin_client.get("/author/reports"))
    slot = inbox.select_one("#item-flags")
    assert slot is not None and slot["hx-get"] == "/author/reports/flags"
    fragment = parse(admin_client.get(slot["hx-get"], headers={"HX-Request": "true"}))
    assert fragment.select_one("html > body > section#item-flags") is not None
    flagged = {li["data-question"]: li for li in fragment.select("li.flagged-item")}
    assert set(flagged) == {"fixture-single", "fixture-trace-join"}
    line = flagged["fixture-single"]
    assert "near-zero or negative discrimination" in text(line.select_one(".flag-reasons"))
    assert text(line.select_one(".n-attempts")) == "40 first attempts"
    assert text(line.select_one(".facility")) == "0.50"
    assert text(line.select_one(".discrimination")).startswith("-0.")
    assert text(line.select_one(".unpicked")) == "c"

    page = parse(admin_client.get("/author/stats/fixture-single"))
    section = page.select_one("section.item")
    assert section is not None and "Flagged" in text(section.select_one(".flag-reasons"))
    picks = {tr["data-key"]: text(tr.select_one(".picks"))
             for tr in section.select("table.choices tr[data-key]")}
    assert picks == {"a": "20", "b": "20", "c": "0"}
    assert text(section.select_one("tr[data-confidence=sure] .wrong")) == "20"
    numeric = parse(admin_client.get("/author/stats/fixture-numeric"))
    assert [s["data-revision"] for s in numeric.select("section.item")] == ["1", "2"]

    bank = parse(admin_client.get("/author/stats?sort=discrimination&order=asc"))
    order = [tr["data-question"] for tr in bank.select("table.item-stats tbody tr")]
    assert order[0] == "fixture-single"
    assert order[-1] == "fixture-trace-join"  # no discrimination (everyone right): last
    by_attempts = parse(admin_client.get("/author/stats?sort=attempts&order=desc"))
    counts = [int(text(td)) for td in by_attempts.select("table.item-stats tbody td.attempts")]
    assert counts == sorted(counts, reverse=True)
    assert bank.select_one("th[aria-sort=ascending]") is not None
    # A made-up sort key falls back to the question order instead of failing.
    assert admin_client.get("/author/stats?sort=nonsense").status_code == 200


def test_the_api_gives_every_author_the_whole_banks_numbers(
    planted: list[First], admin_client: TestClient, author_client: TestClient,
    session_factory: sessionmaker[Session],
) -> None:
    body = admin_client.get("/api/v1/stats/items", params={"sort": "discrimination"}).json()
    assert body[0]["question"] == "fixture-single"
    assert body[0]["flags"] == ["discrimination", "unpicked"]
    with session_factory() as s:
        item = _by_key(stats.item_stats(db_session=s))[("fixture-single", 1)]
    assert body[0]["discrimination"] == pytest.approx(item.discrimination)
    assert {c["key"]: c["picks"] for c in body[0]["choices"]} == {"a": 20, "b": 20, "c": 0}
    one = admin_client.get("/api/v1/stats/items/fixture-numeric").json()
    assert [i["revision"] for i in one] == [1, 2]
    assert admin_client.get("/api/v1/stats/items/no-such").status_code == 404
    assert admin_client.get("/api/v1/stats/items", params={"sort": "x"}).status_code == 422
    # Every author reads the whole bank's statistics, the bank's questions included, and a
    # question that is not theirs leads to its editor in proposal mode.
    assert author_client.get("/api/v1/stats/items", params={"sort": "discrimination"}).json() == body
    assert author_client.get("/api/v1/stats/items/fixture-numeric").json() == one
    page = parse(author_client.get("/author/stats/fixture-single"))
    action = page.select_one("main p.actions a.button")
    assert action is not None and text(action) == "Propose an edit"
    assert action["href"] == "/author/questions/fixture-single"
    rows = parse(author_client.get("/author/stats")).select("table.item-stats tbody tr")
    assert len(rows) == len(body)
