"""Questions with variables: variants, computed keys, templates in the sandbox, and what
`bank check` says when any of it is wrong (file, field, line and variant)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.questions import variants
from app.questions.bank import BankError, content_hash, load_bank
from app.questions.binding import key_binding_problems
from app.questions.schema import MAX_AUDIT_RUNS, MAX_VARIANTS, QuestionDoc
from tests.factories import TESTS

VARIANT_BANK = TESTS / "fixtures" / "variant_bank"

COMPUTED: dict[str, Any] = {
    "slug": "q", "topic": "t", "title": "Ring volume", "difficulty": 2, "type": "numeric",
    "variables": {"world_size": [2, 4], "tensor_mb": [200, 800]},
    "compute": {"per_rank_mb": "2 * (world_size - 1) / world_size * tensor_mb"},
    "prompt": "{{ world_size }} ranks, {{ tensor_mb }} MB: what does each rank send?",
    "answer": {"formula": "per_rank_mb", "unit": "MB", "rel_tol": 0.01},
    "explanation": "Each rank sends {{ per_rank_mb | fmt(',.0f') }} MB.",
}

SINGLE: dict[str, Any] = {
    "slug": "q", "topic": "t", "title": "Chunks", "difficulty": 1, "type": "single",
    "variables": {"world_size": [2, 4]},
    "prompt": "How many chunks does a ring over {{ world_size }} ranks cut a buffer into?",
    "choices": [{"text": "{{ world_size }} chunks", "correct": True},
                {"text": "{{ world_size + 1 }} chunks"},
                {"text": "{{ 2 * world_size }} chunks"}],
    "explanation": "One chunk per rank.",
}


def doc_of(data: dict[str, Any]) -> QuestionDoc:
    return QuestionDoc.model_validate(data)


def with_(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(base)
    data.update(changes)
    return data


class _NoAliases(yaml.SafeDumper):
    """Writes a repeated object out again: the bank refuses YAML aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump(data: dict[str, Any]) -> str:
    return yaml.dump(data, Dumper=_NoAliases, sort_keys=False)


def check(tmp_path: Path, data: dict[str, Any], snippet: str | None = None) -> list[BankError]:
    """`bank check`'s errors for one question file t/q.yaml holding `data`."""
    folder = tmp_path / "bank" / "t"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "q.yaml").write_text(dump(data), encoding="utf-8")
    if snippet is not None:
        (folder / "s.py").write_text(snippet, encoding="utf-8")
    return load_bank(tmp_path / "bank").errors


def one_error(tmp_path: Path, data: dict[str, Any], snippet: str | None = None) -> BankError:
    errors = check(tmp_path, data, snippet)
    assert len(errors) == 1, [str(e) for e in errors]
    assert errors[0].file == "t/q.yaml"
    return errors[0]


# ------------------------------------------------------------------ the fixture bank

def test_the_variant_fixture_bank_loads() -> None:
    bank = load_bank(VARIANT_BANK)
    assert bank.ok, [str(e) for e in bank.errors]
    assert sorted(q.slug for q in bank.questions) == [
        "allreduce-bytes-per-rank", "ring-send-volume", "step-time-doubled-talk", "zero3-memory-case"]


def _fixture(slug: str) -> QuestionDoc:
    return next(q for q in load_bank(VARIANT_BANK).questions if q.slug == slug)


def test_variants_are_the_product_in_written_order_less_the_excluded() -> None:
    doc = _fixture("ring-send-volume")
    assert doc.variant_count == 8
    expected = [{"world_size": w, "tensor_mb": t} for w in (2, 4, 8) for t in (200, 800, 1200)
                if (w, t) != (8, 1200)]
    assert [doc.variant_params(i) for i in range(8)] == expected
    with pytest.raises(IndexError):
        doc.variant_params(8)
    with pytest.raises(IndexError):
        doc.render(8)


def test_render_fills_every_template_and_the_key_from_the_formula() -> None:
    doc = _fixture("ring-send-volume")
    v = doc.render(4)  # world_size 4, tensor_mb 800
    assert v.variant_params(0) == {} and v.variant_count == 1
    assert not v.variables and not v.compute and v.variants is None
    assert v.answer is not None and v.answer.value == 1200.0 and v.answer.formula is None
    assert v.prompt.startswith("4 ranks all-reduce a 800 MB gradient buffer")
    assert "`2 × (4 − 1) / 4 × 800 = 1,200` MB" in v.explanation
    assert "6 steps" in v.explanation and "3 to reduce-scatter" in v.explanation
    # {% raw %} quotes braces for the text; the rendered prompt has them literally.
    assert "(A ring splits the buffer into `{world_size}` chunks.)" in v.prompt
    assert v.render(0) is v
    assert doc.render(4) == v  # deterministic
    # The template is untouched by rendering.
    assert "{{ world_size }}" in doc.prompt and doc.answer is not None and doc.answer.value is None


def test_a_question_without_variables_is_its_own_variant_zero() -> None:
    doc = doc_of({**{k: v for k, v in COMPUTED.items() if k not in ("variables", "compute")},
                  "prompt": "Literal {{ braces }} stay {% as written %}.",
                  "answer": {"value": 3.0}, "explanation": "x"})
    assert doc.variant_count == 1 and doc.variant_params(0) == {}
    assert doc.render(0) is doc
    assert doc.prompt == "Literal {{ braces }} stay {% as written %}."
    with pytest.raises(IndexError):
        doc.render(1)


def test_single_valued_variables_make_one_fixed_input_variant() -> None:
    doc = doc_of(with_(COMPUTED, variables={"world_size": [8], "tensor_mb": [1000]}))
    assert doc.variant_count == 1
    assert doc.render(0).answer.value == pytest.approx(1750.0)  # type: ignore[union-attr]


def test_pick_lists_the_variants_in_its_order() -> None:
    doc = doc_of(with_(COMPUTED, variants={"pick": [{"world_size": 4, "tensor_mb": 200},
                                                   {"world_size": 2, "tensor_mb": 800}]}))
    assert [doc.variant_params(i) for i in range(2)] == [{"world_size": 4, "tensor_mb": 200},
                                                        {"world_size": 2, "tensor_mb": 800}]
    assert doc.render(1).prompt.startswith("2 ranks, 800 MB")


def test_text_without_expressions_renders_exactly_as_written() -> None:
    text = "Trailing newline kept.\n\n```python\nx = 1  # no braces\n```\n"
    doc = doc_of(with_(COMPUTED, explanation=text))
    assert doc.render(0).explanation == text


def test_whole_floats_print_without_a_point_and_fmt_formats() -> None:
    values = {"x": 1200.0, "y": 0.125, "n": 3}
    assert variants.render_text("{{ x }} {{ y }} {{ n / 2 }} {{ x | fmt(',.1f') }}", values) == \
        "1200 0.125 1.5 1,200.0"
    assert variants.render_text("{{ [n, y] }} {{ n > 2 }} {{ 'a' ~ n }}", values) == "[3, 0.125] True a3"


def test_choices_and_correct_when_render_per_variant() -> None:
    doc = doc_of(with_(SINGLE, choices=[
        {"text": "an even number of ranks", "correct_when": "world_size % 2 == 0"},
        {"text": "an odd number of ranks", "correct_when": "world_size % 2 == 1"},
    ], variables={"world_size": [2, 3]}))
    assert doc.render(0).correct_keys == ["a"] and doc.render(1).correct_keys == ["b"]
    assert doc.render(1).choices[1].correct_when is None


def test_world_size_variable_sets_ranks_and_every_variable_is_a_param() -> None:
    doc = _fixture("allreduce-bytes-per-rank")
    v = doc.render(3)
    assert v.verify is not None
    assert v.verify.world_size == 4 and v.verify.params == {"world_size": 4, "mib": 4}
    exp = {e.label: e for e in v.verify.expect}
    share = exp["each rank sends the ring's share of the buffer"].bytes
    assert share is not None and share.equals == 2 * 3 / 4 * 4 * 2**20
    total = exp["every rank ends with the sum of the ranks' values"].value
    assert total is not None and total.equals == 10


def test_an_omitted_is_answer_equals_means_the_formula_value(tmp_path: Path) -> None:
    data = with_(COMPUTED, verify={"snippet": "s.py", "expect": [
        {"label": "measured", "is_answer": True, "value": {"name": "sent_mb", "tol": 0.01}}]})
    assert check(tmp_path, data, "report('sent_mb', 1.0)\n") == []
    doc = doc_of(data)
    assert [doc.render(i).verify.expect[0].value.equals for i in range(4)] == [  # type: ignore[union-attr]
        200.0, 800.0, 300.0, 1200.0]


def test_an_omitted_equals_elsewhere_is_still_required(tmp_path: Path) -> None:
    plain = {k: v for k, v in COMPUTED.items() if k not in ("variables", "compute")}
    plain.update(prompt="p", explanation="e", answer={"value": 1.0},
                 verify={"snippet": "s.py", "expect": [
                     {"label": "m", "is_answer": True, "value": {"name": "x"}}]})
    error = one_error(tmp_path, plain, "report('x', 1)\n")
    assert (error.field, error.message) == (
        "verify.expect[0].value.equals", "a value check needs equals (or, in an exercise, reference: true)")
    not_answer = with_(COMPUTED, verify={"snippet": "s.py", "expect": [
        {"label": "m", "is_answer": True, "value": {"name": "x"}},
        {"label": "n", "value": {"name": "y"}}]})
    error = one_error(tmp_path, not_answer, "report('x', 1)\n")
    assert error.field == "verify.expect[1].value.equals"
    assert "only on an is_answer check" in error.message


# ------------------------------------------------------------------ the sandbox

ESCAPES = [
    ("{{ ''.__class__.__mro__ }}", "attribute access (.__mro__) is not allowed"),
    ("{{ cycler.__init__.__globals__ }}", "attribute access (.__globals__) is not allowed"),
    ("{{ range.__self__ }}", "attribute access (.__self__) is not allowed"),
    ("{{ world_size.real }}", "attribute access (.real) is not allowed"),
    ("{{ lipsum() }}", "only these functions may be called"),
    ("{{ cycler }}", "unknown name 'cycler'"),
    ("{{ self }}", "unknown name 'self'"),
    ("{{ tensor_mb.__add__(1) }}", "attribute access (.__add__)"),
    ("{{ [].append(1) }}", "only these functions may be called"),
    ("{{ world_size | attr('real') }}", "No filter named 'attr'"),
    ("{{ 'x' | center(10**8) }}", "No filter named 'center'"),
    ("{{ range(3) | random }}", "No filter named 'random'"),
    ("{% for i in range(3) %}{{ i }}{% endfor %}", "statements ({% ... %}) are not allowed"),
    ("{% set x = 1 %}{{ x }}", "statements ({% ... %}) are not allowed"),
    ("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "statements ({% ... %}) are not allowed"),
    ("{% include 'x' %}", "statements ({% ... %}) are not allowed"),
    ("{{ range(10**9) }}", "range of 1000000000 numbers; at most 1000"),
    ("{{ range(2**62) | list }}", "range of 4611686018427387904 numbers"),
    ("{{ 9**9**9 }}", "387420489 ** 9 is 2**64 or more"),
    ("{{ 2**64 }}", "a whole number of 2**64 or more"),
    ("{{ 10.0 ** 400 }}", "is too large"),
    ("{{ 'a' * 10**9 }}", "repeating a value 1000000000 times"),
    ("{{ 10**9 * 'ab' }}", "repeating a value 1000000000 times"),
    ("{{ [[1] * 100] * 1000 }}", "repeating a value 1000 times"),
    ("{{ 'a' * 9000 ~ 'b' * 9000 }}", "joining with ~ makes a string longer than 10000"),
    ("{{ '%999999999d' % 1 }}", "'%' formatting of strings is not allowed"),
    ("{{ 1 | fmt('999999999') }}", "format width 999999999 is over 100"),
    ("{{ " + "(" * 300 + "1" + ")" * 300 + " }}", "brackets nested more than 64 deep"),
    ("{{ " + " + ".join(["1"] * 3000) + " }}", "more than 2000 syntax nodes"),
    ("{{ float('inf') }}", "inf is not a finite number"),
    ("{{ int('9' * 60) * int('9' * 60) }}", "2**64 or more"),
    ("{{ undefined_name }}", "unknown name 'undefined_name'"),
    ("{{ min }}", "min is a function"),
]


@pytest.mark.parametrize(("template", "words"), ESCAPES, ids=[t[:40] for t, _ in ESCAPES])
def test_a_template_that_reaches_outside_or_runs_away_is_refused_naming_file_and_field(
    tmp_path: Path, template: str, words: str,
) -> None:
    error = one_error(tmp_path, with_(COMPUTED, explanation=f"Working: {template}"))
    assert error.field == "explanation"
    assert error.line == len(dump(with_(COMPUTED, explanation="x")).split("explanation:")[0]
                             .splitlines()) + 1
    assert words in error.message, error.message
    assert str(error).startswith("t/q.yaml:")


@pytest.mark.parametrize("field", ["compute", "formula", "exclude", "choice", "equals"])
def test_every_expression_site_is_sandboxed_and_named(tmp_path: Path, field: str) -> None:
    bomb = "9**9**9"
    if field == "compute":
        data, where = with_(COMPUTED, compute={"per_rank_mb": bomb}), "compute.per_rank_mb"
    elif field == "formula":
        data, where = with_(COMPUTED, answer={"formula": f"''.__class__ or {bomb}"}), "answer.formula"
    elif field == "exclude":
        data, where = with_(COMPUTED, variants={"exclude": "range.__self__"}), "variants.exclude"
    elif field == "choice":
        data = with_(SINGLE)
        data["choices"][1]["text"] = "{{ 'x' * 10**9 }}"
        where = "choices[1].text"
    else:
        data = with_(COMPUTED, verify={"snippet": "s.py", "expect": [
            {"label": "m", "is_answer": True, "value": {"name": "x", "equals": "{{ cycler.__init__ }}"}}]})
        where = "verify.expect[0].value.equals"
    error = one_error(tmp_path, data, "report('x', 1)\n")
    assert error.field == where, str(error)
    assert "not allowed" in error.message or "2**64 or more" in error.message or \
        "longer than" in error.message, error.message


def test_templates_only_name_variables_computed_values_and_functions(tmp_path: Path) -> None:
    error = one_error(tmp_path, with_(COMPUTED, compute={
        "a": "b + 1", "b": "world_size"}))
    assert error.field == "compute.a" and "unknown name 'b'" in error.message
    error = one_error(tmp_path, with_(COMPUTED, variants={"exclude": "per_rank_mb > 100"}))
    assert error.field == "variants.exclude" and "unknown name 'per_rank_mb'" in error.message


@pytest.mark.parametrize("name", ["range", "if", "loop", "Bad", "self"])
def test_variable_names_that_would_shadow_the_template_language_are_refused(
    tmp_path: Path, name: str,
) -> None:
    error = one_error(tmp_path, with_(COMPUTED, variables={name: [1], "world_size": [2]}))
    assert error.field == f"variables.{name}"


def test_sandbox_caps_cannot_be_raised_from_a_template() -> None:
    # A filter result is bounded as well as an operator's.
    with pytest.raises(variants.TemplateProblem, match="longer than"):
        variants.evaluate("(range(1000) | list) * 11", {})
    with pytest.raises(variants.TemplateProblem, match="division by zero"):
        variants.evaluate("1 // 0", {})
    assert variants.evaluate("[1, 2][1:] + [len('abc')]", {}) == [2, 3]
    assert variants.evaluate("{'a': 1}.a + {'a': 1}['a']", {}) == 2


# ------------------------------------------------------------------ formulas per variant

@pytest.mark.parametrize(("formula", "words"), [
    ("tensor_mb / (world_size - 4)", "variant 3 (world_size=4, tensor_mb=200): division by zero"),
    ("sqrt(2 - world_size)", "variant 3 (world_size=4, tensor_mb=200): math domain error"),
    ("'many' if world_size == 4 else 1", "variant 3 (world_size=4, tensor_mb=200): the formula gives "
                                          "'many', not a number"),
    ("world_size == 4", "variant 1 (world_size=2, tensor_mb=200): the formula gives False"),
    ("[world_size]", "variant 1 (world_size=2, tensor_mb=200): the formula gives [2]"),
    ("float('nan') if world_size > 2 else 1.0", "variant 3 (world_size=4, tensor_mb=200): nan is not "
                                                "a finite number"),
], ids=["error", "domain", "string", "bool", "list", "non-finite"])
def test_a_wrong_formula_is_refused_naming_the_variant_and_its_parameters(
    tmp_path: Path, formula: str, words: str,
) -> None:
    error = one_error(tmp_path, with_(COMPUTED, answer={"formula": formula, "rel_tol": 0.01}))
    assert error.field == "answer.formula"
    assert words in error.message, error.message


def test_a_typed_value_in_a_question_with_variables_is_refused(tmp_path: Path) -> None:
    error = one_error(tmp_path, with_(COMPUTED, answer={"value": 1200, "rel_tol": 0.01}))
    assert error.field == "answer.value" and "write answer.formula" in error.message


def test_a_formula_without_variables_is_refused(tmp_path: Path) -> None:
    data = {k: v for k, v in COMPUTED.items() if k not in ("variables", "compute")}
    error = one_error(tmp_path, {**data, "prompt": "p", "explanation": "e"})
    assert error.field == "answer.formula" and "needs variables" in error.message


def test_two_choices_rendering_alike_in_some_variant_are_refused(tmp_path: Path) -> None:
    data = with_(SINGLE)
    data["choices"][2]["text"] = "{{ 2 * world_size - 1 }} chunks"  # = world_size + 1 when 2
    error = one_error(tmp_path, data)
    assert error.field == "choices"
    assert error.message.startswith("variant 1 (world_size=2): choices b and c render the same text")


def test_correct_when_must_leave_one_key_per_variant(tmp_path: Path) -> None:
    data = with_(SINGLE, choices=[
        {"text": "even", "correct_when": "world_size % 2 == 0"},
        {"text": "four", "correct_when": "world_size == 4"}])
    error = one_error(tmp_path, data)
    assert error.field == "choices"
    assert error.message == ("variant 2 (world_size=4): a single-choice question needs exactly "
                             "1 correct choice, has 2")


# ------------------------------------------------------------------ caps

def test_more_than_eight_variants_must_pick(tmp_path: Path) -> None:
    data = with_(COMPUTED, variables={"world_size": [2, 4, 8], "tensor_mb": [1, 2, 3]})
    error = one_error(tmp_path, data)
    assert error.field == "variables"
    assert f"9 variants; a question has 1 to {MAX_VARIANTS}" in error.message
    picked = with_(data, variants={"pick": [{"world_size": 2, "tensor_mb": t} for t in (1, 2, 3)]})
    assert check(tmp_path, picked) == []
    too_many = with_(data, variants={"pick": [{"world_size": w, "tensor_mb": t}
                                              for w in (2, 4, 8) for t in (1, 2, 3)]})
    assert one_error(tmp_path, too_many).field == "variants.pick"


def test_an_exclude_that_drops_everything_is_refused(tmp_path: Path) -> None:
    error = one_error(tmp_path, with_(COMPUTED, variants={"exclude": "true"}))
    assert "0 variants" in error.message


def test_pick_must_assign_allowed_values_once(tmp_path: Path) -> None:
    bad_value = with_(COMPUTED, variants={"pick": [{"world_size": 3, "tensor_mb": 200}]})
    assert one_error(tmp_path, bad_value).field == "variants.pick[0].world_size"
    twice = with_(COMPUTED, variants={"pick": [{"world_size": 2, "tensor_mb": 200}] * 2})
    assert "picked twice" in one_error(tmp_path, twice).message
    missing = with_(COMPUTED, variants={"pick": [{"world_size": 2}]})
    assert "assigns every variable" in one_error(tmp_path, missing).message


def test_variants_times_knob_combinations_are_capped_at_32_runs(tmp_path: Path) -> None:
    data = with_(COMPUTED, variables={"world_size": [2, 3, 4, 5], "tensor_mb": [1, 2]},
                 verify={"snippet": "s.py", "audit": "all",
                         "knobs": {"k": {"values": [1, 2, 3, 4, 5], "default": 1}},
                         "expect": [{"label": "m", "is_answer": True,
                                     "value": {"name": "x", "tol": 0.5}}]})
    error = one_error(tmp_path, data, "report('x', 1)\n")
    assert error.field == "verify.audit"
    assert error.message == (f"the audit would make 40 runs (8 variants × 5 knob combinations); "
                             f"at most {MAX_AUDIT_RUNS} per question")
    data["verify"]["knobs"]["k"]["values"] = [1, 2, 3, 4]
    errors = check(tmp_path, data, "report('x', 1)\n")
    assert not [e for e in errors if e.field == "verify.audit"], errors


# ------------------------------------------------------------------ measured variants

MEASURED: dict[str, Any] = with_(COMPUTED, verify={"snippet": "s.py", "expect": [
    {"label": "the measured share", "is_answer": True,
     "value": {"name": "sent_mb", "rank": "all", "equals": "{{ per_rank_mb }}", "tol": 0.01}}]})


def test_a_templated_key_check_that_disagrees_with_the_formula_names_the_variant(tmp_path: Path) -> None:
    data = copy.deepcopy(MEASURED)
    data["verify"]["expect"][0]["value"]["equals"] = "{{ per_rank_mb if world_size == 2 else tensor_mb }}"
    errors = check(tmp_path, data, "report('sent_mb', 1.0)\n")
    assert [(e.field, e.message) for e in errors] == [
        ("answer.formula", "variant 3 (world_size=4, tensor_mb=200): the key 300 disagrees with "
                         "expect[0], which measures 200"),
        ("answer.formula", "variant 4 (world_size=4, tensor_mb=800): the key 1200 disagrees with "
                         "expect[0], which measures 800")]
    line = next(i for i, t in enumerate(dump(data).splitlines(), 1) if "formula: per_rank_mb" in t)
    assert errors[0].line == line


def test_when_may_name_variables_and_must_match_a_variant(tmp_path: Path) -> None:
    data = copy.deepcopy(MEASURED)
    data["verify"]["expect"][0]["when"] = {"world_size": 4}
    data["verify"]["expect"].append({"label": "two ranks", "when": {"world_size": 2}, "is_answer": True,
                                     "value": {"name": "sent_mb", "tol": 0.01}})
    assert check(tmp_path, data, "report('sent_mb', 1.0)\n") == []
    doc = doc_of(data)
    assert key_binding_problems(doc) == []
    data["verify"]["expect"][1]["when"] = {"world_size": 3}
    error = one_error(tmp_path, data, "report('sent_mb', 1.0)\n")
    assert error.field == "verify.expect[1].when.world_size" and "not an allowed value" in error.message
    data["verify"]["expect"][1]["when"] = {"nope": 3}
    error = one_error(tmp_path, data, "report('sent_mb', 1.0)\n")
    assert error.field == "verify.expect[1].when.nope"
    assert error.message == "expect[1].when: unknown knob or variable 'nope'"


def test_a_variant_with_no_key_check_of_its_own_is_a_binding_problem() -> None:
    data = copy.deepcopy(MEASURED)
    data["verify"]["expect"][0]["when"] = {"world_size": 4}
    problems = key_binding_problems(doc_of(data))
    assert [str(p) for p in problems] == [
        "variant 1 (world_size=2, tensor_mb=200): a measured numeric question needs an expectation "
        "with is_answer: true (the key is the measured value)"]


def test_a_variable_may_not_share_a_knob_name(tmp_path: Path) -> None:
    data = copy.deepcopy(MEASURED)
    data["verify"]["knobs"] = {"world_size": {"values": [2, 4], "default": 2}}
    error = one_error(tmp_path, data, "report('sent_mb', 1.0)\n")
    assert error.field == "variables.world_size" and "is also a knob" in error.message


def test_a_world_size_variable_takes_whole_numbers_up_to_eight(tmp_path: Path) -> None:
    data = with_(MEASURED, variables={"world_size": [2, 16], "tensor_mb": [1]})
    assert one_error(tmp_path, data, "report('x', 1)\n").field == "variables.world_size"


def test_params_are_written_by_rendering_only(tmp_path: Path) -> None:
    data = copy.deepcopy(MEASURED)
    data["verify"]["params"] = {"world_size": 2}
    assert one_error(tmp_path, data, "report('x', 1)\n").field == "verify.params"


def test_templated_check_bounds_need_variables(tmp_path: Path) -> None:
    plain = {k: v for k, v in COMPUTED.items() if k not in ("variables", "compute")}
    plain.update(prompt="p", explanation="e", answer={"value": 1.0}, verify={"snippet": "s.py", "expect": [
        {"label": "m", "is_answer": True, "collectives": {"op": "all_reduce", "count": "{{ 1 }}"}}]})
    error = one_error(tmp_path, plain, "report('x', 1)\n")
    assert error.field == "verify.expect[0].collectives.count"


def test_collectives_and_bytes_bounds_render_per_variant() -> None:
    data = with_(COMPUTED, verify={"snippet": "s.py", "expect": [
        {"label": "steps", "collectives": {"rank": "all", "op": "all_reduce",
                                           "at_least": "{{ world_size - 1 }}"}},
        {"label": "sent", "is_answer": True, "bytes": {"equals": "{{ per_rank_mb * 10**6 }}", "tol": 0.1}}]})
    data["answer"]["formula"] = "per_rank_mb * 10**6"
    doc = doc_of(data)
    v = doc.render(3)
    assert v.verify is not None
    assert v.verify.expect[0].collectives.at_least == 3  # type: ignore[union-attr]
    assert v.verify.expect[1].bytes.equals == pytest.approx(1.2e9)  # type: ignore[union-attr]
    assert key_binding_problems(doc) == []


# ------------------------------------------------------------------ cases and talk-throughs

def test_a_case_renders_its_parts_and_each_part_is_a_question() -> None:
    doc = _fixture("zero3-memory-case")
    assert doc.variant_count == 4
    v = doc.render(1)  # 7B on 64 GPUs
    assert v.variant_params(0) == {}
    assert "7B-parameter model" in v.prompt and "64 GPUs" in v.prompt
    numeric = v.part(1)
    assert numeric.type == "numeric" and numeric.answer is not None and numeric.answer.value == 1.75
    last = v.part(2)
    assert last.choices[0].text == "3.50 GB" and last.correct_keys == ["c"]
    assert last.prompt == "The job moves to 128 GPUs. What does each GPU now hold of that state?"
    with pytest.raises(ValueError, match="render the variant first"):
        doc.part(0)


CASE: dict[str, Any] = {
    "slug": "q", "topic": "t", "title": "Case", "difficulty": 2, "type": "case",
    "prompt": "A scenario.", "explanation": "Debrief.",
    "parts": [{"prompt": "One?", "type": "single", "explanation": "Because.",
               "choices": [{"text": "yes", "correct": True}, {"text": "no"}]},
              {"prompt": "How many?", "type": "numeric", "answer": {"value": 3}, "explanation": "3."}],
}


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"parts": CASE["parts"][:1]}, "parts", "a case has 2 to 6 parts, has 1"),
    ({"parts": CASE["parts"] * 4}, "parts", "has 8"),
    ({"choices": [{"text": "x", "correct": True}, {"text": "y"}]}, "choices", "a case (its parts"),
    ({"answer": {"value": 1}}, "answer", "has no answer"),
    ({"model_answer": "m"}, "model_answer", "only for type: talk"),
], ids=["too-few", "too-many", "choices", "answer", "model-answer"])
def test_a_case_is_its_parts(tmp_path: Path, change: dict[str, Any], field: str, words: str) -> None:
    error = one_error(tmp_path, with_(CASE, **change))
    assert error.field == field and words in error.message, str(error)


def test_a_broken_part_is_named_by_its_index(tmp_path: Path) -> None:
    data = copy.deepcopy(CASE)
    data["parts"][0]["choices"][1]["correct"] = True
    error = one_error(tmp_path, data)
    assert (error.field, error.message) == (
        "parts[0].choices", "a single-choice question needs exactly 1 correct choice, has 2")
    data = copy.deepcopy(CASE)
    data["parts"][1]["type"] = "trace"
    assert one_error(tmp_path, data).field == "parts[1].type"
    data = copy.deepcopy(CASE)
    data["parts"][0]["explained"] = {"z": "no such choice"}
    assert one_error(tmp_path, data).field == "parts[0].explained.z"


TALK: dict[str, Any] = {
    "slug": "q", "topic": "t", "title": "Talk", "difficulty": 2, "type": "talk",
    "prompt": "Talk me through it.", "model_answer": "First this, then that.",
    "rubric": ["First move.", "Second move.", "Third move."],
}


def test_a_talk_through_needs_a_model_answer_and_three_to_ten_moves(tmp_path: Path) -> None:
    assert check(tmp_path, TALK) == []
    assert doc_of(TALK).explanation == ""
    error = one_error(tmp_path, with_(TALK, rubric=["One.", "Two."]))
    assert error.field == "rubric" and "3 to 10 moves, has 2" in error.message
    error = one_error(tmp_path, {k: v for k, v in TALK.items() if k != "model_answer"})
    assert error.field == "model_answer"
    error = one_error(tmp_path, with_(TALK, choices=[{"text": "a", "correct": True}, {"text": "b"}]))
    assert error.field == "choices"
    # Any other question still needs an explanation.
    error = one_error(tmp_path, {k: v for k, v in CASE.items() if k != "explanation"})
    assert (error.field, error.message) == ("explanation", "Field required")


def test_a_talk_through_with_variables_renders_its_rubric() -> None:
    doc = doc_of(with_(TALK, variables={"gpus": [256, 512]},
                       rubric=["Scopes {{ gpus }} GPUs.", "Two.", "Three."]))
    assert doc.render(1).rubric[0] == "Scopes 512 GPUs."


def test_exercises_have_no_variables(tmp_path: Path) -> None:
    bank = load_bank(TESTS / "fixtures" / "exercise_bank")
    [exercise] = bank.questions
    data = exercise.model_dump(mode="json", exclude_defaults=True)
    data["variables"] = {"x": [1]}
    with pytest.raises(ValueError, match="an exercise has no variables"):
        QuestionDoc.model_validate(data)


# ------------------------------------------------------------------ hashing

def test_reordering_variables_or_compute_changes_the_content_hash() -> None:
    doc = doc_of(COMPUTED)
    swapped = doc_of(with_(COMPUTED, variables={"tensor_mb": [200, 800], "world_size": [2, 4]}))
    assert swapped == doc  # dicts compare without order...
    assert content_hash(swapped) != content_hash(doc)  # ...but the variants are numbered differently
    assert swapped.variant_params(1) == {"tensor_mb": 200, "world_size": 4}
    assert doc.variant_params(1) == {"world_size": 2, "tensor_mb": 800}


@pytest.mark.parametrize(("check_", "field"), [("value", "equals"), ("collectives", "count"),
                                               ("bytes", "at_most")])
def test_a_templated_check_value_is_one_whole_expression(tmp_path: Path, check_: str, field: str) -> None:
    body: dict[str, Any] = {"value": {"name": "x"}, "collectives": {"op": "all_reduce"}, "bytes": {}}[check_]
    body[field] = "{{ world_size }} and {{ tensor_mb }}"
    data = with_(COMPUTED, verify={"snippet": "s.py", "expect": [
        {"label": "key", "is_answer": True, "value": {"name": "k", "tol": 0.01}},
        {"label": "m", check_: body}]})
    error = one_error(tmp_path, data, "report('x', 1)\n")
    assert error.field == f"verify.expect[1].{check_}.{field}"
    assert "exactly one {{ expression }}" in error.message


def test_bank_check_prints_the_file_line_and_field_of_a_refused_template(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from app.cli import app

    check(tmp_path, with_(COMPUTED, prompt="{{ cycler.__init__.__globals__ }}"))
    result = CliRunner().invoke(app, ["bank", "check", str(tmp_path / "bank")])
    assert result.exit_code == 1
    line = next(i for i, t in enumerate((tmp_path / "bank" / "t" / "q.yaml").read_text().splitlines(), 1)
                if t.startswith("prompt:"))
    assert (f"t/q.yaml:{line} [prompt]: attribute access (.__globals__) is not allowed"
            in " ".join(result.stderr.split()))
    ok = CliRunner().invoke(app, ["bank", "check", str(VARIANT_BANK)])
    assert ok.exit_code == 0 and "4 questions in 3 topics: all valid" in ok.stdout
