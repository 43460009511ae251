"""Issue 12's breadth topics 1-6 hold what the issue asks of them, read from the real bank files.

The runs themselves are checked by `ddpdrill bank verify`; these tests check the
files: enough measured questions per topic, answer keys bound to expectations,
measured traces from this torch, tags from the documented vocabulary.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest

from app.questions import fairness
from app.questions.bank import load_bank
from app.questions.binding import key_binding_problems
from app.questions.schema import QuestionDoc
from tests.factories import REAL_BANK

BREADTH_TOPICS = [
    "distributed-sampler", "checkpointing", "mixed-precision",
    "gradient-clipping", "batchnorm-buffers", "sharding-memory",
]
TAG_ROW = re.compile(r"^\|\s*`([a-z0-9-]+)`\s*\|")


@pytest.fixture(scope="module")
def questions() -> list[QuestionDoc]:
    bank = load_bank(REAL_BANK)
    assert bank.ok, "\n".join(str(e) for e in bank.errors)
    return [q for q in bank.questions if q.topic in BREADTH_TOPICS]


@pytest.mark.parametrize("topic", BREADTH_TOPICS)
def test_each_breadth_topic_has_five_questions_three_measured(
        questions: list[QuestionDoc], topic: str) -> None:
    mine = [q for q in questions if q.topic == topic]
    assert len(mine) >= 5, [q.slug for q in mine]
    assert sum(q.verify is not None for q in mine) >= 3, [q.slug for q in mine]


def test_every_answer_key_is_bound_to_its_expectations(questions: list[QuestionDoc]) -> None:
    problems = {q.slug: [str(p) for p in key_binding_problems(q)] for q in questions}
    assert {slug: p for slug, p in problems.items() if p} == {}


def test_every_expectation_names_the_facts_it_measures(questions: list[QuestionDoc]) -> None:
    unnamed = [(q.slug, e.label) for q in questions if q.verify
               for e in q.verify.expect if not e.facts and not (e.supports or e.rules_out)]
    assert unnamed == []


def test_breadth_topics_have_measured_traces_knobs_and_every_format(
        questions: list[QuestionDoc]) -> None:
    traces = [q for q in questions if q.type == "trace"]
    measured = [q for q in traces if q.trace and q.trace.source.kind == "measured"]
    assert len(traces) >= 3 and len(measured) >= 2
    assert all(q.trace and q.trace.source.torch_version == "2.13.0" for q in measured)
    assert sum(bool(q.verify and q.verify.knobs) for q in questions) >= 12
    assert {q.effective_format for q in questions} == {"single", "multi", "numeric"}
    assert all(1 <= len(q.correct_keys) <= 3 for q in questions if q.effective_format == "multi")


def test_single_answer_keys_hide_their_length_and_move_around(
        questions: list[QuestionDoc]) -> None:
    """The bank's length rules hold within these topics too: the key is the longest choice
    now and then but not habitually, and no other length rank is a habit either (a key that
    is never the longest teaches "strike out the longest")."""
    singles = [q for q in questions if q.effective_format == "single"]
    ranks = Counter(fairness.key_length_rank(q) for q in singles)
    assert 0 < ranks[1] <= fairness.MAX_LONGEST_KEY_SHARE * len(singles), ranks
    assert all(n <= fairness.MAX_OTHER_RANK_SHARE * len(singles)
               for rank, n in ranks.items() if rank > 1), ranks
    positions = Counter(q.correct_keys[0] for q in singles)
    assert set(positions) == {"a", "b", "c", "d"}
    assert max(positions.values()) - min(positions.values()) <= 2, positions


def test_breadth_topics_use_only_documented_tags(questions: list[QuestionDoc]) -> None:
    doc = (REAL_BANK.parent / "docs" / "question-format.md").read_text()
    vocabulary = {m[1] for line in doc.splitlines() if (m := TAG_ROW.match(line))}
    assert {t for q in questions for t in q.tags} - vocabulary == set()
