"""docs/coverage.md is generated from question_bank/_facts.yaml and the facts expectations name."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from app.cli import app as cli_app
from app.questions.bank import load_bank
from app.questions.facts import default_coverage_path, measured_by, render_coverage
from tests.factories import REAL_BANK, copy_bank

FACTS = """\
sections:
  - group: Fixture facts
    facts:
      - id: ddp-averages
        text: DDP leaves the mean in .grad
        questions: [fixture-single]
      - id: words-only
        text: A fact the fixture only talks about
        questions: [fixture-single, fixture-multi]
"""


def _bank_with_facts(tmp_path: Path, facts: str = FACTS, fact_ids: str = "[ddp-averages]") -> Path:
    bank_dir = copy_bank(tmp_path / "bank")
    (bank_dir / "_facts.yaml").write_text(facts)
    path = bank_dir / "basics" / "fixture-single.yaml"
    named = f"      supports: [b]\n      facts: {fact_ids}\n"
    path.write_text(path.read_text().replace("      supports: [b]\n", named))
    return bank_dir


def test_committed_coverage_page_matches_the_generator() -> None:
    bank = load_bank(REAL_BANK)
    assert bank.ok and bank.facts is not None, [str(e) for e in bank.errors]
    committed = default_coverage_path(REAL_BANK).read_text(encoding="utf-8")
    assert committed == render_coverage(bank.facts, bank.questions), (
        "docs/coverage.md is stale: run `ddpdrill bank coverage`")


def test_every_measured_fact_in_the_real_bank_comes_from_an_expectation() -> None:
    bank = load_bank(REAL_BANK)
    assert bank.facts is not None
    measured = measured_by(bank.questions)
    assert measured, "no expectation names a fact"
    assert set(measured) <= bank.facts.ids
    page = default_coverage_path(REAL_BANK).read_text(encoding="utf-8")
    for fact_id, slugs in measured.items():
        row = next(line for line in page.splitlines() if f"`{fact_id}`" in line)
        for slug in slugs:
            assert f"**{slug}**" in row


def test_only_a_fact_named_by_an_expectation_is_marked_measured(tmp_path: Path) -> None:
    bank = load_bank(_bank_with_facts(tmp_path))
    assert bank.ok and bank.facts is not None, [str(e) for e in bank.errors]
    rows = {line.split(" | ")[1]: line for line in render_coverage(bank.facts, bank.questions).splitlines()
            if line.startswith("| ") and "`" in line}
    assert "**fixture-single**" in rows["`ddp-averages`"]
    assert "**" not in rows["`words-only`"]
    assert "fixture-single, fixture-multi" in rows["`words-only`"]


def test_an_expectation_naming_an_unknown_fact_is_an_error_with_its_line(tmp_path: Path) -> None:
    bank_dir = _bank_with_facts(tmp_path, fact_ids="[ddp-averages, no-such-fact]")
    lines = (bank_dir / "basics" / "fixture-single.yaml").read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if "no-such-fact" in text)
    errors = load_bank(bank_dir).errors
    assert [(e.file, e.field, e.line) for e in errors] == [
        ("basics/fixture-single.yaml", "verify.expect[0].facts[1]", line)]
    assert "'no-such-fact' is not in _facts.yaml" in errors[0].message


def test_a_fact_naming_a_missing_question_is_an_error(tmp_path: Path) -> None:
    bank_dir = _bank_with_facts(tmp_path, FACTS.replace("[fixture-single, fixture-multi]",
                                                         "[fixture-single, gone-question]"))
    errors = load_bank(bank_dir).errors
    assert [(e.file, e.field) for e in errors] == [("_facts.yaml", "sections[0].facts[1].questions[1]")]
    assert "names no question 'gone-question'" in errors[0].message


def test_duplicate_fact_ids_are_an_error(tmp_path: Path) -> None:
    bank_dir = _bank_with_facts(tmp_path, FACTS.replace("id: words-only", "id: ddp-averages"))
    errors = load_bank(bank_dir).errors
    assert errors and errors[0].file == "_facts.yaml"
    assert "used twice" in errors[0].message


def test_bank_coverage_writes_the_page_and_check_flags_a_stale_one(tmp_path: Path) -> None:
    bank_dir = _bank_with_facts(tmp_path)
    target = tmp_path / "coverage.md"
    runner = CliRunner()
    stale = runner.invoke(cli_app, ["bank", "coverage", str(bank_dir), "--output", str(target), "--check"])
    assert stale.exit_code == 1 and "stale" in stale.stderr
    wrote = runner.invoke(cli_app, ["bank", "coverage", str(bank_dir), "--output", str(target)])
    assert wrote.exit_code == 0, wrote.output
    assert "**fixture-single**" in target.read_text()
    fresh = runner.invoke(cli_app, ["bank", "coverage", str(bank_dir), "--output", str(target), "--check"])
    assert fresh.exit_code == 0, fresh.output
