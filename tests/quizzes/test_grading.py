"""Grading is pure: a question document and an answer give a score, or the answer is invalid."""

from __future__ import annotations

from typing import Any

import pytest

from app.questions.schema import QuestionDoc, tolerance_text
from app.quizzes.grading import (
    MAX_TALK_BYTES,
    InvalidAnswer,
    correct_answer,
    grade,
    grade_part,
    grade_parts,
)


def doc(**fields: Any) -> QuestionDoc:
    base: dict[str, Any] = {"slug": "q", "topic": "t", "title": "Q", "difficulty": 1,
                            "prompt": "?", "explanation": "because"}
    return QuestionDoc.model_validate({**base, **fields})


SINGLE = doc(type="single", choices=[{"text": "x"}, {"text": "y", "correct": True}, {"text": "z"}])
# Right choices are a, b and d; c and e are wrong.
MULTI = doc(type="multi", choices=[{"text": "1", "correct": True}, {"text": "2", "correct": True},
                                   {"text": "3"}, {"text": "4", "correct": True}, {"text": "5"}])


def numeric(**answer: Any) -> QuestionDoc:
    return doc(type="numeric", answer=answer)


def test_single_right_and_wrong() -> None:
    assert (grade(SINGLE, "b").score, grade(SINGLE, "b").correct) == (1.0, True)
    assert (grade(SINGLE, "a").score, grade(SINGLE, "a").correct) == (0.0, False)


def test_single_accepts_a_one_element_list() -> None:
    assert grade(SINGLE, ["b"]).answer == "b"


@pytest.mark.parametrize("answer", ["d", "", None, ["a", "b"], [], 1, "B"])
def test_single_rejects_what_is_not_one_of_the_choices(answer: Any) -> None:
    with pytest.raises(InvalidAnswer):
        grade(SINGLE, answer)


@pytest.mark.parametrize(
    ("picks", "score"),
    [
        (["a", "b", "d"], 1.0),           # all right
        (["a"], 1 / 3),                    # one of three
        (["a", "b"], 2 / 3),
        (["a", "b", "d", "c"], 2 / 3),     # all right, one wrong: (3 - 1) / 3
        (["a", "c"], 0.0),                 # one right, one wrong
        (["a", "c", "e"], 0.0),            # never below zero
        (["c", "e"], 0.0),
    ],
)
def test_multi_partial_credit_is_right_minus_wrong_over_right(picks: list[str], score: float) -> None:
    result = grade(MULTI, picks)
    assert result.score == pytest.approx(score)
    assert result.correct is (score == 1.0)
    assert result.answer == sorted(picks)


def test_multi_accepts_a_single_key_as_a_one_pick_list() -> None:
    assert grade(MULTI, "a").answer == ["a"]


@pytest.mark.parametrize("answer", [[], ["a", "a"], ["a", "x"], [1], None, 2.0])
def test_multi_rejects_empty_repeated_or_unknown_picks(answer: Any) -> None:
    with pytest.raises(InvalidAnswer):
        grade(MULTI, answer)


@pytest.mark.parametrize(
    ("answer", "tol", "right"),
    [
        (4.0, {"abs_tol": 0.01}, True),
        (4.01, {"abs_tol": 0.01}, True),      # on the edge counts
        (3.99, {"abs_tol": 0.01}, True),
        (4.02, {"abs_tol": 0.01}, False),
        (1470, {"rel_tol": 0.05, "value": 1400}, True),
        (1330, {"rel_tol": 0.05, "value": 1400}, True),
        (1471, {"rel_tol": 0.05, "value": 1400}, False),
        (1329, {"rel_tol": 0.05, "value": 1400}, False),
        (-105, {"rel_tol": 0.05, "value": -100}, True),   # relative to |value|
        (4.0, {}, True),                       # no tolerance: exact
        (4.000001, {}, False),
        (4.5, {"abs_tol": 0.5, "rel_tol": 0.01}, True),   # either tolerance suffices
    ],
)
def test_numeric_uses_absolute_or_relative_tolerance(
    answer: float, tol: dict[str, float], right: bool
) -> None:
    question = numeric(value=tol.pop("value", 4), **tol)
    result = grade(question, answer)
    assert result.correct is right
    assert result.score == (1.0 if right else 0.0)


@pytest.mark.parametrize(("typed", "value"), [("1400", 1400.0), (" 1,400 ", 1400.0), ("1_400", 1400.0),
                                              ("1.4e3", 1400.0), ("-2", -2.0), (7, 7.0)])
def test_numeric_reads_what_a_learner_types(typed: Any, value: float) -> None:
    assert grade(numeric(value=1400, rel_tol=0.05), typed).answer == value


@pytest.mark.parametrize("typed", ["", "  ", "abc", "12 MB", "nan", "inf", "-inf", True, None, ["1"]])
def test_numeric_rejects_what_is_not_a_finite_number(typed: Any) -> None:
    with pytest.raises(InvalidAnswer):
        grade(numeric(value=1, abs_tol=0.1), typed)


def test_trace_questions_grade_by_their_answer_format() -> None:
    trace = {"kind": "rank_events", "columns": ["Rank 0"], "steps": [{"step": "1", "cells": ["x"]}]}
    as_multi = doc(type="trace", answer_format="multi", trace=trace,
                   choices=[{"text": "p", "correct": True}, {"text": "q", "correct": True}, {"text": "r"}])
    assert grade(as_multi, ["a"]).score == 0.5
    as_numeric = doc(type="trace", answer_format="numeric", trace=trace, answer={"value": 4, "abs_tol": 0.5})
    assert grade(as_numeric, "4.4").correct


def test_correct_answer_has_the_shape_answers_take() -> None:
    assert correct_answer(SINGLE) == "b"
    assert correct_answer(MULTI) == ["a", "b", "d"]
    assert correct_answer(numeric(value=1400, rel_tol=0.05)) == 1400.0


@pytest.mark.parametrize(
    ("answer", "words"),
    [({"value": 4, "unit": "ms", "abs_tol": 0.01}, "±0.01 ms"),
     ({"value": 1400, "rel_tol": 0.05}, "±5%"),
     ({"value": 2, "abs_tol": 0.5, "rel_tol": 0.1}, "±0.5 or ±10%"),
     ({"value": 2}, "exact")],
)
def test_tolerance_is_stated_in_words(answer: dict[str, Any], words: str) -> None:
    assert tolerance_text(numeric(**answer)) == words


# ------------------------------------------------------------------ cases and talk-throughs

CASE = doc(type="case", parts=[
    {"prompt": "one?", "type": "single", "explanation": "e",
     "choices": [{"text": "x"}, {"text": "y", "correct": True}]},
    {"prompt": "which?", "type": "multi", "explanation": "e",
     "choices": [{"text": "p", "correct": True}, {"text": "q", "correct": True}, {"text": "r"}]},
    {"prompt": "how many?", "type": "numeric", "explanation": "e", "answer": {"value": 14, "rel_tol": 0.05}},
])


def test_a_case_scores_the_mean_of_its_parts_each_graded_like_its_type() -> None:
    g = grade(CASE, {"parts": ["b", ["a", "b"], "14,2"]})
    assert (g.score, g.correct) == (1.0, True)
    assert g.answer == {"parts": ["b", ["a", "b"], 14.2]}
    half = grade(CASE, {"parts": ["a", ["a"], "13.5"]})  # 0, 0.5 (one of two right picks), 1
    assert half.score == pytest.approx(0.5) and not half.correct
    assert [p.score for p in grade_parts(CASE, {"parts": ["a", ["a"], "13.5"]})] == [0.0, 0.5, 1.0]
    assert correct_answer(CASE) == {"parts": ["b", ["a", "b"], 14.0]}


def test_a_case_part_is_graded_alone_as_it_is_answered() -> None:
    assert grade_part(CASE, 2, "14").correct
    assert not grade_part(CASE, 0, "a").correct
    with pytest.raises(InvalidAnswer):
        grade_part(CASE, 3, "a")
    with pytest.raises(InvalidAnswer):
        grade_part(CASE, 0, "z")


@pytest.mark.parametrize("answer", [["b", ["a"], "14"], {"parts": ["b", ["a"]]}, {"parts": "b"},
                                    {"parts": ["b", ["a"], "fourteen"]}, {"parts": ["z", ["a"], "1"]}, None])
def test_a_case_answer_has_one_valid_answer_per_part(answer: Any) -> None:
    with pytest.raises(InvalidAnswer):
        grade(CASE, answer)


TALK = doc(type="talk", model_answer="m", explanation="", rubric=["one", "two", "three", "four", "five"])


WRITTEN = "I would roll back first, then scope it across jobs and ranks before guessing a cause."


def test_a_talk_through_scores_the_share_of_moves_ticked() -> None:
    g = grade(TALK, {"text": WRITTEN, "ticked": [3, 0, 1, 2]})
    assert (g.score, g.correct) == (0.8, True)
    assert g.answer == {"text": WRITTEN, "ticked": [0, 1, 2, 3]}
    assert grade(TALK, {"text": WRITTEN, "ticked": [0, 1, 2]}).correct is False
    assert grade(TALK, {"ticked": []}).score == 0.0
    assert correct_answer(TALK) is None


@pytest.mark.parametrize("text", ["", "   ", "I would roll back first.", "a" * MAX_TALK_BYTES,
                                  "a b c d e f g h i j k l m n o p"])
def test_ticking_the_rubric_takes_a_written_answer_of_real_length(text: str) -> None:
    with pytest.raises(InvalidAnswer, match="12 words"):
        grade(TALK, {"text": text, "ticked": [0]})


@pytest.mark.parametrize("answer", [
    {"text": "x", "ticked": [5]}, {"text": "x", "ticked": [0, 0]}, {"text": "x", "ticked": [True]},
    {"text": 3, "ticked": []}, {"text": "x", "ticked": "0"}, {"text": "x", "extra": 1}, "text", None,
    {"text": "é" * (MAX_TALK_BYTES // 2 + 1), "ticked": []},
])
def test_a_talk_answer_is_text_up_to_8_kb_and_distinct_rubric_numbers(answer: Any) -> None:
    with pytest.raises(InvalidAnswer):
        grade(TALK, answer)
    assert grade(TALK, {"text": (WRITTEN + " ") * 90, "ticked": [4]}).score == 0.2


def test_a_question_with_variables_is_graded_through_its_rendered_variant() -> None:
    template = doc(type="numeric", variables={"n": [2, 4]}, compute={"total": "n * 3"},
                   prompt="{{ n }} ranks?", answer={"formula": "total"})
    with pytest.raises(ValueError, match="rendered variant"):
        grade(template, "6")
    assert grade(template.render(0), "6").correct and grade(template.render(1), "12").correct
    assert correct_answer(template.render(1)) == 12.0
