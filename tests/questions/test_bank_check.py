"""Loading the bank from files: every mistake names its file, field and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.questions.bank import load_bank
from tests.factories import BROKEN_BANKS, FIXTURE_BANK, REAL_BANK, copy_bank

# Each folder in tests/fixtures/broken holds one mistake: (file, field, line, words of the message).
BROKEN = {
    "malformed-yaml": ("basics/malformed-yaml.yaml", "", 4, "not valid YAML"),
    "missing-field": ("basics/missing-field.yaml", "explanation", 1, "Field required"),
    "bad-type": ("basics/bad-type.yaml", "difficulty", 4, "valid integer"),
    "two-correct": ("basics/two-correct.yaml", "choices", 8, "exactly 1 correct choice, has 2"),
    "trace-without-trace": ("traces/trace-without-trace.yaml", "trace", 1, "needs a trace"),
    "ragged-trace": ("traces/ragged-trace.yaml", "trace.steps[1].cells", 15, "1 cells but there are 2"),
    "bucket-times": ("traces/bucket-times.yaml", "trace.buckets[1]", 13, "bucket times must satisfy"),
    "missing-snippet": ("basics/missing-snippet.yaml", "verify.snippet", 13, "'not_there.py' not found"),
    "snippet-syntax": ("basics/snippet_syntax.py", "verify.snippet", 2, "'return' outside function"),
    "slug-mismatch": ("basics/slug-mismatch.yaml", "slug", 1, "file is named 'slug-mismatch.yaml'"),
    "duplicate-slug": ("traces/same-slug.yaml", "slug", 1, "also used by basics/same-slug.yaml"),
    "two-checks": ("basics/two-checks.yaml", "verify.expect[1]", 17, "exactly one of"),
    "knob-default": ("basics/knob-default.yaml", "verify.knobs.scale.default", 17, "default 3 is not one of"),
}


def test_every_broken_fixture_folder_is_listed() -> None:
    assert {p.name for p in BROKEN_BANKS.iterdir() if p.is_dir()} == set(BROKEN)


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_load_bank_names_file_field_and_line_of_the_mistake(case: str) -> None:
    file, field, line, words = BROKEN[case]
    bank = load_bank(BROKEN_BANKS / case)
    assert len(bank.errors) == 1, [str(e) for e in bank.errors]
    error = bank.errors[0]
    assert (error.file, error.field, error.line) == (file, field, line)
    assert words in error.message
    assert str(error).startswith(f"{file}:{line}")
    assert not bank.questions or case == "duplicate-slug"


def test_fixture_bank_loads_with_keys_and_snippet() -> None:
    bank = load_bank(FIXTURE_BANK)
    assert bank.ok, [str(e) for e in bank.errors]
    assert sorted(q.slug for q in bank.questions) == [
        "fixture-multi", "fixture-numeric", "fixture-single", "fixture-trace-buckets", "fixture-trace-join",
    ]
    assert [t.title for t in bank.topics.values()] == ["Basics", "Traces"]
    single = next(q for q in bank.questions if q.slug == "fixture-single")
    assert [c.key for c in single.choices] == ["a", "b", "c"]
    assert single.correct_keys == ["b"]
    assert single.snippet_text is not None
    assert single.snippet_text.endswith('report("g", 1.5 * params["scale"])\n')


def test_real_question_bank_passes_load_bank() -> None:
    bank = load_bank(REAL_BANK)
    assert bank.ok, "\n".join(str(e) for e in bank.errors)
    assert bank.questions


def test_missing_bank_folder_is_an_error(tmp_path: Path) -> None:
    bank = load_bank(tmp_path / "nowhere")
    assert not bank.ok
    assert "bank folder not found" in bank.errors[0].message


def test_topic_field_must_match_the_folder(tmp_path: Path) -> None:
    bank_dir = copy_bank(tmp_path / "bank")
    path = bank_dir / "basics" / "fixture-numeric.yaml"
    path.write_text(path.read_text().replace("topic: basics", "topic: traces"))
    errors = load_bank(bank_dir).errors
    assert [(e.file, e.field, e.line) for e in errors] == [("basics/fixture-numeric.yaml", "topic", 2)]


def test_a_file_that_is_not_a_mapping_is_an_error(tmp_path: Path) -> None:
    bank_dir = copy_bank(tmp_path / "bank")
    (bank_dir / "basics" / "a-list.yaml").write_text("- just\n- a list\n")
    errors = load_bank(bank_dir).errors
    assert [(e.file, e.line) for e in errors] == [("basics/a-list.yaml", 1)]
    assert "mapping" in errors[0].message


def test_every_error_in_a_bank_is_reported_not_just_the_first(tmp_path: Path) -> None:
    bank_dir = copy_bank(tmp_path / "bank")
    for case in ("two-correct", "bad-type"):
        name = f"{case}.yaml"
        (bank_dir / "basics" / name).write_text((BROKEN_BANKS / case / "basics" / name).read_text())
    bank = load_bank(bank_dir)
    assert sorted(e.file for e in bank.errors) == ["basics/bad-type.yaml", "basics/two-correct.yaml"]
    assert len(bank.questions) == 5


def _move_single_key_to_c(bank_dir: Path) -> Path:
    """fixture-single with its key moved from b to c and the expectations left alone."""
    path = bank_dir / "basics" / "fixture-single.yaml"
    text = path.read_text()
    text = text.replace("  - text: The SENTINEL-RIGHT mean\n    correct: true\n",
                        "  - text: The SENTINEL-RIGHT mean\n")
    text = text.replace("  - text: The SENTINEL-WRONG-C local value\n",
                        "  - text: The SENTINEL-WRONG-C local value\n    correct: true\n")
    path.write_text(text)
    return path


def test_a_key_moved_without_its_expectations_names_the_binding_fields(tmp_path: Path) -> None:
    bank_dir = copy_bank(tmp_path / "bank")
    path = _move_single_key_to_c(bank_dir)
    lines = path.read_text().splitlines()
    errors = load_bank(bank_dir).errors
    found = {(e.file, e.field, e.line) for e in errors}
    supports_line = next(i for i, line in enumerate(lines, 1) if "supports: [b]" in line)
    rules_out_line = next(i for i, line in enumerate(lines, 1) if "rules_out: [a, c]" in line)
    assert ("basics/fixture-single.yaml", "verify.expect[0].supports", supports_line) in found
    assert ("basics/fixture-single.yaml", "verify.expect[0].rules_out", rules_out_line) in found
    messages = " | ".join(e.message for e in errors)
    assert "supports choice b, but the key marks it wrong" in messages
    assert "rules out choice c, but the key marks it right" in messages
    assert "choice c is marked right but no expectation supports it" in messages
    assert all(e.file == "basics/fixture-single.yaml" for e in errors)
    assert not any(q.slug == "fixture-single" for q in load_bank(bank_dir).questions)


def test_a_key_moved_together_with_its_expectations_loads(tmp_path: Path) -> None:
    bank_dir = copy_bank(tmp_path / "bank")
    path = _move_single_key_to_c(bank_dir)
    path.write_text(path.read_text().replace("supports: [b]", "supports: [c]")
                    .replace("rules_out: [a, c]", "rules_out: [a, b]"))
    bank = load_bank(bank_dir)
    assert bank.ok, [str(e) for e in bank.errors]
    single = next(q for q in bank.questions if q.slug == "fixture-single")
    assert single.correct_keys == ["c"]


def test_an_explained_choice_needs_no_expectation(tmp_path: Path) -> None:
    bank_dir = copy_bank(tmp_path / "bank")
    path = bank_dir / "basics" / "fixture-single.yaml"
    text = path.read_text().replace("      rules_out: [a, c]\n", "      rules_out: [a]\n")
    path.write_text(text)
    assert [e.field for e in load_bank(bank_dir).errors] == ["choices"]
    path.write_text(text.replace("verify:\n", 'explained:\n  c: "Not run here: a reason."\nverify:\n'))
    assert load_bank(bank_dir).ok


NUMERIC_MEASURED = """\
slug: fixture-numeric-measured
topic: basics
title: Fixture numeric with a measured key
difficulty: 1
type: numeric
prompt: What is the mean?
answer:
  value: {key}
  abs_tol: 0.001
explanation: The reducer divides the sum by two.
verify:
  snippet: fixture_single.py
  expect:
    - label: the mean on every rank
      is_answer: true
      value: {{name: g, rank: all, equals: 1.5}}
"""


def test_a_numeric_key_that_disagrees_with_its_is_answer_check_is_an_error(tmp_path: Path) -> None:
    bank_dir = copy_bank(tmp_path / "bank")
    path = bank_dir / "basics" / "fixture-numeric-measured.yaml"
    path.write_text(NUMERIC_MEASURED.format(key=1.5))
    assert load_bank(bank_dir).ok
    path.write_text(NUMERIC_MEASURED.format(key=3.0))
    errors = load_bank(bank_dir).errors
    assert [(e.file, e.field, e.line) for e in errors] == [
        ("basics/fixture-numeric-measured.yaml", "answer.value", 8)]
    assert "the key 3 disagrees with expect[0], which measures 1.5" in errors[0].message


def test_every_real_question_with_expectations_binds_its_key() -> None:
    bank = load_bank(REAL_BANK)
    measured = [q for q in bank.questions if q.verify is not None]
    assert measured and bank.ok, "\n".join(str(e) for e in bank.errors)
