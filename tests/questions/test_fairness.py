"""Fairness rules over small banks built in code: each rule fires on its pattern and not otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import app as cli_app
from app.questions.bank import load_bank, write_bank
from app.questions.fairness import (
    HEDGE_WORDS,
    MAX_LONGEST_KEY_SHARE,
    MAX_OTHER_RANK_SHARE,
    MIN_QUESTIONS_FOR_SHARE_RULES,
    check_fairness,
    hedges,
    key_length_rank,
    near_duplicates,
    same_computations,
)
from app.questions.schema import QuestionDoc, TopicDoc
from tests.factories import REAL_BANK

WORDS = ["rank", "bucket", "gradient", "join", "sampler", "hook", "ring", "barrier", "epoch",
         "buffer", "divisor", "timeout", "stream", "shard", "optimizer", "batch", "loss", "queue"]


def _prompt(i: int) -> str:
    """A prompt of distinct words per question, so no two are near-duplicates."""
    return " ".join(f"{WORDS[(i * 7 + j) % len(WORDS)]}{i}x{j}" for j in range(14)) + "?"


def single(i: int, key: int, lengths: tuple[int, ...] = (26, 24, 22, 20), prompt: str = "") -> QuestionDoc:
    choices = [{"text": ("w" * n), "correct": k == key} for k, n in enumerate(lengths)]
    return QuestionDoc.model_validate({
        "slug": f"q{i}", "topic": "t", "title": f"Q{i}", "difficulty": 1, "type": "single",
        "prompt": prompt or _prompt(i), "choices": choices, "explanation": "Because."})


def ranked(i: int, key: int, rank: int) -> QuestionDoc:
    """A single-answer question whose key is choice `key` and the `rank`-th longest (1-4)."""
    lengths = [26, 24, 22, 20]
    key_length = lengths.pop(rank - 1)
    order = [*lengths[:key], key_length, *lengths[key:]]
    return single(i, key, tuple(order))


def multi(i: int, correct: list[bool], lengths: list[int] | None = None) -> QuestionDoc:
    lengths = lengths or [20] * len(correct)
    choices = [{"text": "m" * n, "correct": c} for c, n in zip(correct, lengths, strict=True)]
    return QuestionDoc.model_validate({
        "slug": f"m{i}", "topic": "t", "title": f"M{i}", "difficulty": 2, "type": "multi",
        "prompt": _prompt(100 + i), "choices": choices, "explanation": "Because."})


def balanced(n: int) -> list[QuestionDoc]:
    """n single-answer questions, keys cycling a-d and, every four questions, through the four
    length ranks: no position and no length rank holds more than its share."""
    return [ranked(i, i % 4, (i + i // 4) % 4 + 1) for i in range(n)]


def rules(findings: list) -> list[str]:
    return [f.rule for f in findings]


def case(i: int, part_keys: list[tuple[int, int]]) -> QuestionDoc:
    """A case whose parts are single-answer questions, each (key, length rank)."""
    parts = []
    for key, rank in part_keys:
        q = ranked(0, key, rank)
        parts.append({"prompt": f"part {len(parts)}?", "type": "single", "explanation": "e.",
                      "choices": [c.model_dump(exclude={"key", "correct_when"}) for c in q.choices]})
    return QuestionDoc.model_validate({
        "slug": f"c{i}", "topic": "t", "title": f"C{i}", "difficulty": 2, "type": "case",
        "prompt": _prompt(400 + i), "explanation": "Debrief.", "parts": parts})


def test_a_balanced_bank_has_no_findings() -> None:
    report = check_fairness(balanced(16))
    assert report.errors == [] and report.warnings == []
    assert report.positions == {"a": 4, "b": 4, "c": 4, "d": 4}
    assert report.rank_counts == {1: 4, 2: 4, 3: 4, 4: 4}
    assert report.shortest_count == 4


def test_the_key_length_rank_counts_ties_as_the_better_rank() -> None:
    assert key_length_rank(single(0, 0, (30, 20, 20, 30))) == 1
    assert key_length_rank(single(0, 1, (30, 20, 25, 20))) == 3
    assert key_length_rank(single(0, 2, (30, 20, 25, 20))) == 2


def test_longest_keys_in_more_than_the_allowed_share_fail_the_bank() -> None:
    n = 20
    allowed = int(MAX_LONGEST_KEY_SHARE * n)  # 7 of 20 is 35%: still allowed
    docs = [ranked(i, i % 4, 1 if i < allowed else i % 3 + 2) for i in range(n)]
    assert check_fairness(docs).errors == []
    docs[allowed] = ranked(allowed, allowed % 4, 1)
    report = check_fairness(docs)
    assert rules(report.errors) == ["length-rank"]
    assert report.longest_key_count == allowed + 1
    assert "longest choice in 8 of 20" in report.errors[0].message


def test_keys_that_dodge_the_longest_by_one_place_fail_the_bank() -> None:
    # The over-fit the review found: no key is the longest, but too many are second-longest.
    n = 20
    allowed = int(MAX_OTHER_RANK_SHARE * n)  # 8 of 20 is 40%: still allowed
    docs = [ranked(i, i % 4, 2 if i < allowed else (1, 3, 4)[i % 3]) for i in range(n)]
    assert check_fairness(docs).errors == []
    docs[allowed] = ranked(allowed, allowed % 4, 2)
    report = check_fairness(docs)
    assert rules(report.errors) == ["length-rank"]
    assert "the key is the 2nd choice in 9 of 20" in report.errors[0].message


@pytest.mark.parametrize("rank", [3, 4])
def test_every_rank_is_bounded_not_only_the_first_two(rank: int) -> None:
    docs = [ranked(i, i % 4, rank if i < 9 else (1, 2, 3, 4)[i % 4]) for i in range(20)]
    assert "length-rank" in rules(check_fairness(docs).errors)


def test_a_bank_that_never_lets_the_longest_or_the_shortest_win_fails() -> None:
    never_longest = [ranked(i, i % 4, i % 3 + 2) for i in range(21)]
    messages = [f.message for f in check_fairness(never_longest).errors]
    assert messages == ["the key is the longest choice in only 0 of 21 single-answer items (0.0%); "
                        "at least 15%, or striking it out wins"]
    never_shortest = [ranked(i, i % 4, i % 3 + 1) for i in range(21)]
    assert [f.message.split(" in only")[0] for f in check_fairness(never_shortest).errors] == [
        "the key is the shortest choice"]


def test_share_rules_wait_for_enough_questions() -> None:
    n = MIN_QUESTIONS_FOR_SHARE_RULES - 1
    docs = [ranked(i, 0, 1) for i in range(n)]
    report = check_fairness(docs)
    assert report.errors == []


def test_case_parts_count_in_the_bank_wide_shares_and_positions() -> None:
    # 12 balanced questions and a case of five parts whose keys are all choice a and the
    # longest: 8 of 17 longest (47%) and 8 of 17 in position a.
    report = check_fairness([*balanced(12), case(1, [(0, 1)] * 5)])
    assert report.single_count == 17
    assert report.rank_counts[1] == 8 and report.positions["a"] == 8
    assert sorted(rules(report.errors)) == ["key-position", "length-rank"]


def test_a_key_that_stands_out_by_length_is_a_warning_naming_the_file_and_part() -> None:
    docs = balanced(16)
    docs[3] = single(3, 3, lengths=(20, 21, 22, 28))
    docs[5] = single(5, 1, lengths=(20, 12, 22, 21))
    report = check_fairness([*docs, case(1, [(0, 2), (1, 3)]), QuestionDoc.model_validate({
        "slug": "c2", "topic": "t", "title": "C2", "difficulty": 2, "type": "case",
        "prompt": _prompt(500), "explanation": "e.", "parts": [
            {"prompt": "n?", "type": "numeric", "answer": {"value": 1}, "explanation": "1."},
            {"prompt": "which?", "type": "single", "explanation": "e.", "choices": [
                {"text": "w" * 20}, {"text": "w" * 40, "correct": True}]}]})])
    assert [(f.rule, f.file, f.message) for f in report.warnings] == [
        ("length-outlier", "t/q3.yaml", "the key is much longer than every other choice"),
        ("length-outlier", "t/q5.yaml", "the key is much shorter than every other choice"),
        ("length-outlier", "t/c2.yaml", "parts[1] the key is much longer than every other choice")]


def test_a_key_that_alone_repeats_the_prompt_in_too_many_questions_fails_the_bank() -> None:
    def echoing(i: int, echo: bool) -> QuestionDoc:
        prompt = f"Why does the reducer{i} wait for bucket{i} gradients before stepping?"
        key = f"the reducer{i} launches bucket{i} late" if echo else "it launches them late"
        texts = [key, "a rank exits the loop", "the sampler repeats", "a hook forgot it"]
        return QuestionDoc.model_validate({
            "slug": f"e{i}", "topic": "t", "title": "E", "difficulty": 1, "type": "single",
            "prompt": prompt, "explanation": "e.",
            "choices": [{"text": x, "correct": k == 0} for k, x in enumerate(texts)]})
    docs = [*balanced(16)] + [echoing(i, i < 5) for i in range(8)]  # 5 of 24 echo: 21%
    assert "prompt-echo" not in rules(check_fairness(docs).errors)
    docs += [echoing(i, True) for i in range(8, 14)]  # 11 of 30: 37%
    report = check_fairness(docs)
    assert report.echo_count == 11
    assert "prompt-echo" in rules(report.errors)


@pytest.mark.parametrize("text", ["All of the above", "none of these", "both of the above are true",
                                  "Either of the other answers"])
def test_a_choice_about_the_other_choices_is_an_error(text: str) -> None:
    q = QuestionDoc.model_validate({
        "slug": "x", "topic": "t", "title": "X", "difficulty": 1, "type": "single",
        "prompt": _prompt(600), "explanation": "e.",
        "choices": [{"text": "the reducer sums"}, {"text": "each rank keeps its own"},
                    {"text": text, "correct": True}]})
    report = check_fairness([*balanced(12), q])
    assert [(f.rule, f.file) for f in report.errors] == [("about-choices", "t/x.yaml")]
    assert report.errors[0].message.startswith("choice c speaks about the other choices")


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
    assert "warning t/q0.yaml: the key is much longer than every other choice" in result.stderr
    assert "16 questions in 1 topics: all valid (1 fairness warning(s))" in result.stdout
    out = " ".join(result.stdout.split())
    assert ("16 single-answer questions and case parts; the key's length rank: longest 4 (25%), "
            "2nd 4 (25%), 3rd 4 (25%), 4th 4 (25%)") in out

    bad_docs = [single(i, 0) for i in range(16)]
    write_bank(tmp_path / "bad", bad_docs, topics)
    result = runner.invoke(cli_app, ["bank", "check", str(tmp_path / "bad")])
    assert result.exit_code == 1
    assert "choice a is the key of 16 of 16" in result.stderr
    assert "the key is the longest choice in 16 of 16" in " ".join(result.stderr.split())
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


def test_talk_throughs_stay_out_of_the_bank_wide_counts() -> None:
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


def numeric(slug: str, topic: str, variables: dict, formula: str, prompt: str) -> QuestionDoc:
    return QuestionDoc.model_validate({
        "slug": slug, "topic": topic, "title": slug, "difficulty": 2, "type": "numeric",
        "variables": variables, "compute": {"key": formula}, "prompt": prompt,
        "answer": {"formula": "key", "rel_tol": 0.01}, "explanation": "e."})


def test_the_same_computation_in_two_topics_is_found_through_variants_and_case_parts() -> None:
    # The review's pair: one question's variant 1 is another's variant 0, in other words.
    by_stage = numeric("state-by-stage", "zero", {"p": [13, 7], "n": [8], "stage": [2]},
                       "2 * p + 14 * p / n",
                       "A {{ p }}B model on {{ n }} GPUs, ZeRO-{{ stage }}: GB per GPU?")
    stage_two = numeric("zero-two-gb", "memory", {"params": [3, 7], "gpus": [16, 8]},
                        "2 * params + 14 * params / gpus",
                        "Under ZeRO stage 2, {{ params }} billion parameters over {{ gpus }} GPUs "
                        "hold how many GB?")
    found = same_computations([by_stage, stage_two])
    assert [(a.doc.slug, a.variant, b.doc.slug, b.variant, a.key) for a, b in found] == [
        ("state-by-stage", 1, "zero-two-gb", 3, 26.25)]
    report = check_fairness([*balanced(12), by_stage, stage_two])
    assert rules(report.errors) == ["same-computation"] and report.same_computations == 1
    assert report.errors[0].file == "zero/state-by-stage.yaml"
    message = report.errors[0].message
    assert "variant 1 asks for the same number (26.25) from the same inputs (2, 7, 8)" in message
    assert "memory/zero-two-gb.yaml variant 3" in message

    case_part = QuestionDoc.model_validate({
        "slug": "sizing-case", "topic": "design", "title": "C", "difficulty": 3, "type": "case",
        "variables": {"p": [7]}, "compute": {"gb": "2 * p + 14 * p / 8"},
        "prompt": "A {{ p }}B model on 8 GPUs.", "explanation": "e.",
        "parts": [{"prompt": "GB per GPU under ZeRO-2?", "type": "numeric",
                   "answer": {"formula": "gb", "rel_tol": 0.01}, "explanation": "e."},
                  {"prompt": "Which?", "type": "single", "explanation": "e.",
                   "choices": [{"text": "x", "correct": True}, {"text": "y"}]}]})
    assert [(a.doc.slug, b.doc.slug, b.where) for a, b in same_computations([by_stage, case_part])] == [
        ("state-by-stage", "sizing-case", "parts[0] ")]


def test_an_equal_key_from_other_inputs_or_one_shared_number_is_no_duplicate() -> None:
    a = numeric("a", "t", {"x": [3], "y": [4]}, "x * y", "{{ x }} ranks send {{ y }} MB each: total MB?")
    b = numeric("b", "t", {"x": [2], "y": [6]}, "x * y", "{{ x }} ranks send {{ y }} MB each: total MB?")
    c = numeric("c", "u", {"x": [12]}, "x", "A {{ x }} MB buffer: how many MB?")
    d = numeric("d", "v", {"x": [12]}, "x + 0", "Also {{ x }} MB: how many MB?")
    assert same_computations([a, b]) == []
    assert same_computations([c, d]) == []  # one input only: a coincidence, not an exercise


def test_the_real_bank_bounds_every_length_rank_of_its_keys() -> None:
    # Fails on the bank as it was at tag before-landing-7: 58 of 144 single-answer items
    # (40.3%) had the second-longest key and 10 (7%) the longest.
    report = check_fairness(load_bank(REAL_BANK).questions)
    assert [str(f) for f in report.errors if f.rule == "length-rank"] == []
    n = report.single_count
    assert report.rank_counts[1] / n <= MAX_LONGEST_KEY_SHARE
    assert all(count / n <= MAX_OTHER_RANK_SHARE for count in report.rank_counts.values())


def test_the_real_bank_asks_no_computation_twice() -> None:
    # Fails on the bank as it was at tag before-landing-7: four pairs, among them
    # zero-state-per-gpu-by-stage / mem-zero-stages-gigabytes and
    # model-state-per-gpu-3d / mem-model-state-tp-pp-zero.
    pairs = same_computations(load_bank(REAL_BANK).questions)
    assert [(a.name(), b.name()) for a, b in pairs] == []


def test_the_real_bank_passes_every_fairness_rule() -> None:
    report = check_fairness(load_bank(REAL_BANK).questions)
    assert [str(f) for f in report.errors] == []
