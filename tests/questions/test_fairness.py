"""Fairness rules over small banks built in code: each rule fires on its pattern and not otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import app as cli_app
from app.questions.bank import write_bank
from app.questions.fairness import (
    HEDGE_WORDS,
    MAX_LONGEST_KEY_SHARE,
    MIN_QUESTIONS_FOR_SHARE_RULES,
    check_fairness,
    hedges,
    near_duplicates,
)
from app.questions.schema import QuestionDoc, TopicDoc

WORDS = ["rank", "bucket", "gradient", "join", "sampler", "hook", "ring", "barrier", "epoch",
         "buffer", "divisor", "timeout", "stream", "shard", "optimizer", "batch", "loss", "queue"]


def _prompt(i: int) -> str:
    """A prompt of distinct words per question, so no two are near-duplicates."""
    return " ".join(f"{WORDS[(i * 7 + j) % len(WORDS)]}{i}x{j}" for j in range(14)) + "?"


def single(i: int, key: int, lengths: tuple[int, ...] = (20, 20, 20, 20), prompt: str = "") -> QuestionDoc:
    choices = [{"text": ("w" * n), "correct": k == key} for k, n in enumerate(lengths)]
    return QuestionDoc.model_validate({
        "slug": f"q{i}", "topic": "t", "title": f"Q{i}", "difficulty": 1, "type": "single",
        "prompt": prompt or _prompt(i), "choices": choices, "explanation": "Because."})


def multi(i: int, correct: list[bool], lengths: list[int] | None = None) -> QuestionDoc:
    lengths = lengths or [20] * len(correct)
    choices = [{"text": "m" * n, "correct": c} for c, n in zip(correct, lengths, strict=True)]
    return QuestionDoc.model_validate({
        "slug": f"m{i}", "topic": "t", "title": f"M{i}", "difficulty": 2, "type": "multi",
        "prompt": _prompt(100 + i), "choices": choices, "explanation": "Because."})


def balanced(n: int) -> list[QuestionDoc]:
    """n single-answer questions, keys cycling a-d, all choices the same length."""
    return [single(i, i % 4) for i in range(n)]


def rules(findings: list) -> list[str]:
    return [f.rule for f in findings]


def test_a_balanced_bank_has_no_findings() -> None:
    report = check_fairness(balanced(16))
    assert report.errors == [] and report.warnings == []
    assert report.positions == {"a": 4, "b": 4, "c": 4, "d": 4}


def test_a_strictly_longest_key_is_a_warning_naming_the_file() -> None:
    docs = balanced(16)
    docs[3] = single(3, 3, lengths=(20, 20, 20, 21))
    report = check_fairness(docs)
    assert [(f.rule, f.file) for f in report.warnings] == [("longest-key", "t/q3.yaml")]
    assert report.errors == []


def test_a_key_tied_for_longest_is_not_strictly_longest() -> None:
    docs = balanced(16)
    docs[3] = single(3, 3, lengths=(30, 20, 20, 30))
    assert check_fairness(docs).warnings == []


def test_longest_keys_in_more_than_the_allowed_share_fail_the_bank() -> None:
    n = 20
    allowed = int(MAX_LONGEST_KEY_SHARE * n)  # 7 of 20 is 35%: still allowed
    docs = balanced(n)
    for i in range(allowed):
        docs[i] = single(i, i % 4, lengths=tuple(40 if k == i % 4 else 20 for k in range(4)))
    assert check_fairness(docs).errors == []
    docs[allowed] = single(allowed, allowed % 4,
                           lengths=tuple(40 if k == allowed % 4 else 20 for k in range(4)))
    report = check_fairness(docs)
    assert rules(report.errors) == ["longest-key-share"]
    assert report.longest_key_count == allowed + 1
    assert "8 of 20" in report.errors[0].message


def test_share_rules_wait_for_enough_questions() -> None:
    n = MIN_QUESTIONS_FOR_SHARE_RULES - 1
    docs = [single(i, 0, lengths=(40, 20, 20, 20)) for i in range(n)]
    report = check_fairness(docs)
    assert report.errors == []
    assert rules(report.warnings) == ["longest-key"] * n


def test_one_position_holding_too_many_keys_fails_the_bank() -> None:
    docs = balanced(20)  # 5 per position
    for i in (1, 2, 3):  # a now holds 8 of 20 = 40%: the limit itself is allowed
        docs[i] = single(i, 0)
    assert check_fairness(docs).errors == []
    docs[5] = single(5, 0)  # 9 of 20 = 45%
    report = check_fairness(docs)
    assert rules(report.errors) == ["key-position"]
    assert "choice a is the key of 9 of 20" in report.errors[0].message


def test_multi_answer_with_all_but_one_correct_is_a_warning() -> None:
    docs = [*balanced(12), multi(1, [True, True, True, False]), multi(2, [True, False, True, False])]
    report = check_fairness(docs)
    assert [(f.rule, f.file) for f in report.warnings] == [("all-but-one", "t/m1.yaml")]
    assert report.multi_correct_counts == {"m1": 3, "m2": 2}
    assert report.errors == []


def test_multi_answer_with_more_than_three_correct_and_longer_keys_warns() -> None:
    docs = [*balanced(12), multi(1, [True] * 4 + [False] * 2, [50, 50, 50, 50, 20, 20])]
    assert sorted(rules(check_fairness(docs).warnings)) == ["longest-keys", "many-correct"]


def test_near_duplicate_prompts_fail_the_bank_and_distinct_ones_do_not() -> None:
    base = ("Two ranks train a linear model under join with three batches on rank zero and two "
            "on rank one; what does rank one do at the third step of the loop?")
    reworded = base.replace("linear model", "small linear network").replace("loop?", "epoch?")
    docs = [*balanced(12), single(50, 1, prompt=base), single(51, 2, prompt=reworded)]
    report = check_fairness(docs)
    assert rules(report.errors) == ["near-duplicate"]
    assert report.errors[0].file == "t/q50.yaml" and "t/q51.yaml" in report.errors[0].message
    assert near_duplicates(balanced(12)) == []


def test_bank_check_prints_warnings_without_failing_and_fails_on_bank_errors(tmp_path: Path) -> None:
    topics = {"t": TopicDoc(title="T")}
    ok_docs = balanced(16)
    ok_docs[0] = single(0, 0, lengths=(40, 20, 20, 20))
    write_bank(tmp_path / "ok", ok_docs, topics)
    runner = CliRunner()
    result = runner.invoke(cli_app, ["bank", "check", str(tmp_path / "ok")])
    assert result.exit_code == 0, result.output
    assert "warning t/q0.yaml: the correct choice is strictly the longest" in result.stderr
    assert "16 questions in 1 topics: all valid (1 fairness warning(s))" in result.stdout

    bad_docs = [single(i, 0) for i in range(16)]
    write_bank(tmp_path / "bad", bad_docs, topics)
    result = runner.invoke(cli_app, ["bank", "check", str(tmp_path / "bad")])
    assert result.exit_code == 1
    assert "choice a is the key of 16 of 16" in result.stderr
    assert "key positions: a: 16" in result.stdout


def hedged(i: int, texts: list[str], key: int) -> QuestionDoc:
    choices = [{"text": t, "correct": k == key} for k, t in enumerate(texts)]
    return QuestionDoc.model_validate({
        "slug": f"h{i}", "topic": "t", "title": f"H{i}", "difficulty": 1, "type": "single",
        "prompt": _prompt(200 + i), "choices": choices, "explanation": "Because."})


PLAIN = ["the reducer sums gradients", "each rank keeps its own", "rank zero broadcasts it"]


@pytest.mark.parametrize("word", list(HEDGE_WORDS))
def test_a_key_that_alone_hedges_is_an_error_naming_file_and_choice(word: str) -> None:
    texts = [*PLAIN, f"it {word.upper() if word == 'can' else word} divide by the world size"]
    report = check_fairness([*balanced(12), hedged(1, texts, 3)])
    assert [(f.rule, f.file) for f in report.errors] == [("hedged-key", "t/h1.yaml")]
    assert report.errors[0].message.startswith(f"choice d ({word!r}), the key, is the only choice")


def test_a_hedge_in_a_distractor_too_or_in_no_choice_is_fine() -> None:
    both = hedged(1, ["it usually fails", *PLAIN[1:], "it may divide"], 3)
    wrong_only = hedged(2, ["it usually fails", *PLAIN[1:], "it divides"], 3)
    assert check_fairness([*balanced(12), both, wrong_only]).errors == []


@pytest.mark.parametrize("text", ["it cannot divide", "it can't divide", "scan the ranks",
                                  "`can_sync` is set", "mayhem ensues", "it often_fails", "most cases"])
def test_hedge_words_are_whole_words_only(text: str) -> None:
    assert hedges(text) == []
    assert check_fairness([*balanced(12), hedged(1, [*PLAIN, text], 3)]).errors == []


def test_the_hedge_words_are_exactly_the_format_list() -> None:
    assert HEDGE_WORDS == ("usually", "typically", "generally", "often", "may", "might", "can",
                           "could", "sometimes", "tends", "likely", "mostly", "in most cases", "depends")
    assert hedges("In most\ncases it Depends; it MIGHT") == ["in most cases", "depends", "might"]


def test_a_hedged_key_in_a_case_part_or_in_one_variant_is_named() -> None:
    case = QuestionDoc.model_validate({
        "slug": "c", "topic": "t", "title": "C", "difficulty": 2, "type": "case",
        "prompt": "A scenario.", "explanation": "Debrief.",
        "parts": [{"prompt": "n?", "type": "numeric", "answer": {"value": 1}, "explanation": "1."},
                  {"prompt": "which?", "type": "single", "explanation": "e.",
                   "choices": [{"text": "it always fails"}, {"text": "it often works", "correct": True}]}]})
    templated = QuestionDoc.model_validate({
        "slug": "v", "topic": "t", "title": "V", "difficulty": 1, "type": "single",
        "variables": {"word": ["is", "tends to be"]}, "prompt": _prompt(300),
        "choices": [{"text": "it {{ word }} divided", "correct": True}, {"text": "it is summed"}],
        "explanation": "e."})
    report = check_fairness([*balanced(12), case, templated])
    assert [(f.file, f.message.split(",")[0]) for f in report.errors] == [
        ("t/c.yaml", "parts[1] choice b ('often')"), ("t/v.yaml", "choice a ('tends')")]


def test_cases_and_talk_throughs_stay_out_of_the_bank_wide_counts() -> None:
    talk = QuestionDoc.model_validate({
        "slug": "k", "topic": "t", "title": "K", "difficulty": 2, "type": "talk",
        "prompt": "Talk me through it.", "model_answer": "m", "rubric": ["a", "b", "c"]})
    report = check_fairness([*balanced(16), talk])
    assert report.single_count == 16 and report.errors == []


def test_bank_check_fails_on_a_hedged_key_naming_file_and_choice(tmp_path: Path) -> None:
    docs = [*balanced(12), hedged(1, [*PLAIN, "it might divide"], 3)]
    write_bank(tmp_path / "b", docs, {"t": TopicDoc(title="T")})
    result = CliRunner().invoke(cli_app, ["bank", "check", str(tmp_path / "b")])
    assert result.exit_code == 1
    assert ("t/h1.yaml: choice d ('might'), the key, is the only choice that hedges"
            in " ".join(result.stderr.split()))
