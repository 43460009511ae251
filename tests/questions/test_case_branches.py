"""Cases whose later part follows an earlier choice (`depends_on` + `branches`): what `bank
check` accepts and refuses (naming the field), how a variant renders every branch, how
grading picks the version the learner's choice led to, and that the fairness rules read
every branch."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from app.questions.bank import load_bank
from app.questions.fairness import hedged_keys, items
from app.quizzes.grading import InvalidAnswer, correct_answer, grade, grade_part, normalise_answer
from tests.factories import TESTS
from tests.questions.test_variants import check, doc_of, one_error

BRANCHING_BANK = TESTS / "fixtures" / "branching_bank"

PICK: dict[str, Any] = {"prompt": "Where does the group sit?", "type": "single", "explanation": "E.",
                        "choices": [{"text": "Inside a node", "correct": True},
                                    {"text": "Across two nodes"}]}
CASE: dict[str, Any] = {
    "slug": "q", "topic": "t", "title": "Case", "difficulty": 2, "type": "case",
    "prompt": "A scenario.", "explanation": "Debrief.",
    "parts": [
        PICK,
        {"depends_on": 0, "branches": {
            "a": {"prompt": "Inside: how many ms?", "type": "numeric", "answer": {"value": 32},
                  "explanation": "32."},
            "b": {"prompt": "Across: how many ms?", "type": "numeric", "answer": {"value": 288},
                  "explanation": "288."}}},
        {"prompt": "Last?", "type": "single", "explanation": "E.",
         "choices": [{"text": "yes", "correct": True}, {"text": "no"}]},
    ],
}


def _with_part(j: int, part: dict[str, Any]) -> dict[str, Any]:
    data = copy.deepcopy(CASE)
    data["parts"][j] = part
    return data


def test_a_part_may_follow_an_earlier_choice_with_one_branch_per_choice(tmp_path: Path) -> None:
    assert check(tmp_path, CASE) == []
    doc = doc_of(CASE)
    assert doc.parts[1].part_type == "numeric"
    assert [(k, p.prompt) for k, p in doc.part_versions(1)] == [
        ("a", "Inside: how many ms?"), ("b", "Across: how many ms?")]
    assert [(k, p.prompt) for k, p in doc.part_versions(0)] == [(None, "Where does the group sit?")]
    assert doc.part(1, ["b"]).answer is not None and doc.part(1, ["b"]).answer.value == 288
    with pytest.raises(ValueError, match="follows the choice made in part 0"):
        doc.part(1)


BRANCH_A = CASE["parts"][1]["branches"]["a"]
BRANCH_B = CASE["parts"][1]["branches"]["b"]


@pytest.mark.parametrize(("part", "field", "words"), [
    ({"depends_on": 0, "branches": {"a": BRANCH_A}}, "parts[1].branches",
     "one branch per choice of part 0 (a, b); has a"),
    ({"depends_on": 0, "branches": {"a": BRANCH_A, "b": BRANCH_B, "c": BRANCH_B}},
     "parts[1].branches", "has a, b, c"),
    ({"depends_on": 2, "branches": {"a": BRANCH_A, "b": BRANCH_B}}, "parts[1].depends_on",
     "only on an earlier part (0 to 0), not on part 2"),
    ({"depends_on": 0, "branches": {"a": BRANCH_A, "b": {**BRANCH_B, "type": "single", "answer": None,
                                                         "choices": [{"text": "x", "correct": True},
                                                                     {"text": "y"}]}}},
     "parts[1].branches", "answered the same way (one type); found numeric, single"),
    ({"branches": {"a": BRANCH_A, "b": BRANCH_B}}, "parts[1].depends_on", "which earlier part"),
    ({"depends_on": 0}, "parts[1].branches", "one version per choice"),
    ({"depends_on": 0, "prompt": "Mine too?", "branches": {"a": BRANCH_A, "b": BRANCH_B}},
     "parts[1].prompt", "no prompt of its own"),
    ({"depends_on": 0, "branches": {"a": BRANCH_A, "b": {**BRANCH_B, "answer": None}}},
     "parts[1].branches.b.answer", "a numeric question needs answer"),
], ids=["missing-branch", "extra-branch", "later-part", "mixed-types", "no-depends-on",
        "no-branches", "own-prompt", "broken-branch"])
def test_a_branching_part_is_refused_naming_the_field(
    tmp_path: Path, part: dict[str, Any], field: str, words: str,
) -> None:
    error = one_error(tmp_path, _with_part(1, part))
    assert error.field == field and words in error.message, str(error)


def test_a_part_can_follow_only_a_single_answer_part(tmp_path: Path) -> None:
    data = copy.deepcopy(CASE)
    data["parts"][0] = {"prompt": "How many?", "type": "numeric", "answer": {"value": 3},
                        "explanation": "3."}
    error = one_error(tmp_path, data)
    assert error.field == "parts[1].depends_on" and "single-answer part" in error.message


def test_every_branch_renders_per_variant_and_is_checked_like_a_part(tmp_path: Path) -> None:
    data = copy.deepcopy(CASE)
    data["variables"] = {"layers": [80, 40]}
    data["compute"] = {"ms": "layers * 4 * 0.9", "inside_ms": "layers * 4 * 0.1"}
    data["parts"][1]["branches"]["a"]["answer"] = {"formula": "inside_ms"}
    data["parts"][1]["branches"]["b"] = {"prompt": "{{ layers }} layers across: how many ms?",
                                         "type": "numeric", "answer": {"formula": "ms"},
                                         "explanation": "{{ ms }} ms."}
    assert check(tmp_path, data) == []
    doc = doc_of(data).render(1)
    b = doc.part(1, ["b"])
    assert (b.prompt, b.answer and b.answer.value, b.explanation) == (
        "40 layers across: how many ms?", 144.0, "144 ms.")
    # A typed value in a branch of a question with variables is refused like anywhere else.
    data["parts"][1]["branches"]["a"]["answer"] = {"value": 32}
    assert one_error(tmp_path, data).field == "parts[1].branches.a.answer.value"
    # Two choices of one branch rendering alike are refused, naming the branch.
    data = copy.deepcopy(data)
    data["parts"][1]["branches"]["a"] = {"prompt": "Which?", "type": "numeric",
                                         "answer": {"formula": "ms"}, "explanation": "E."}
    data["parts"][2]["choices"] = [{"text": "{{ layers }}", "correct": True}, {"text": "{{ layers }}"}]
    assert "render the same text" in one_error(tmp_path, data).message


def test_grading_follows_the_version_the_learners_choice_picked() -> None:
    doc = doc_of(CASE)
    # Across two nodes (wrong), then the right number for that choice, then right.
    assert grade_part(doc, 1, 288, ["b"]).correct
    assert not grade_part(doc, 1, 32, ["b"]).correct
    graded = grade(doc, {"parts": ["b", 288, "a"]})
    assert (round(graded.score, 4), graded.correct) == (0.6667, False)
    assert grade(doc, {"parts": ["a", 32, "a"]}).correct
    # The key shown is the one of the path the learner took; without an answer, the key's own path.
    assert correct_answer(doc, {"parts": ["b", 288, "a"]}) == {"parts": ["a", 288.0, "a"]}
    assert correct_answer(doc) == {"parts": ["a", 32.0, "a"]}
    assert normalise_answer(doc, {"parts": ["b", "288", "a"]}) == {"parts": ["b", 288.0, "a"]}
    with pytest.raises(InvalidAnswer):
        normalise_answer(doc, {"parts": ["b", "x", "a"]})


def test_the_fairness_rules_read_every_branch() -> None:
    doc = doc_of(_with_part(1, {"depends_on": 0, "branches": {
        "a": {"prompt": "Why?", "type": "single", "explanation": "E.",
              "choices": [{"text": "It often helps", "correct": True}, {"text": "Never"}]},
        "b": {"prompt": "Why not?", "type": "single", "explanation": "E.",
              "choices": [{"text": "Because", "correct": True}, {"text": "No"}]}}}))
    assert [i.where for i in items(doc)] == ["parts[0] ", "parts[1].branches[a] ", "parts[1].branches[b] ",
                                           "parts[2] "]
    # A hedged key in one branch is found and named by its branch.
    assert hedged_keys(doc) == ["parts[1].branches[a] choice a ('often')"]


def test_the_branching_fixture_bank_loads() -> None:
    bank = load_bank(BRANCHING_BANK)
    assert bank.errors == []
    (doc,) = bank.questions
    assert doc.render(0).part(1, ["a"]).answer is not None
