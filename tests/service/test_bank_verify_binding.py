"""`ddpdrill bank verify` holds the answer key to the expectations bound to it (the same gate as
Publish): change only the key, only an expectation, or both consistently, on real runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker
from typer.testing import CliRunner

from app.cli import app
from tests.conftest import FIXTURE_BANK
from tests.service.test_bank_verify import cli_env, load

__all__ = ["cli_env"]

SLUG = "fixture-single"
BINDING = ("      value: {name: g, rank: all, equals: 1.5}\n"
           "      supports: [b]\n      rules_out: [a, c]\n")


def _bank(tmp_path: Path, *edits: tuple[str, str]) -> Path:
    """The fixture bank with fixture-single's mean measurement bound to b, then these edits."""
    bank = tmp_path / "bank"
    shutil.copytree(FIXTURE_BANK, bank)
    path = bank / "basics" / f"{SLUG}.yaml"
    doc = path.read_text()
    doc = doc.replace("      value: {name: g, rank: all, equals: 1.5}\n", BINDING)
    for old, new in edits:
        assert old in doc, old
        doc = doc.replace(old, new)
    path.write_text(doc)
    return bank


def _audit(cli: CliRunner, session_factory: sessionmaker[Session], bank: Path) -> tuple[int, dict]:
    load(session_factory, bank)
    result = cli.invoke(app, ["bank", "verify", "--json", "--slug", SLUG])
    [audit] = json.loads(result.stdout)
    return result.exit_code, audit


KEY_TO_C = [("  - text: The SENTINEL-RIGHT mean\n    correct: true\n",
             "  - text: The SENTINEL-RIGHT mean\n"),
            ("  - text: The SENTINEL-WRONG-C local value\n",
             "  - text: The SENTINEL-WRONG-C local value\n    correct: true\n")]
EXPECT_TO_C = [("supports: [b]\n      rules_out: [a, c]", "supports: [c]\n      rules_out: [a, b]")]


def test_a_bound_bank_passes(cli_env: CliRunner, session_factory: sessionmaker[Session],
                             tmp_path: Path) -> None:
    code, audit = _audit(cli_env, session_factory, _bank(tmp_path))
    assert code == 0 and audit["passed"] and audit["binding_problems"] == []


@pytest.mark.parametrize(("edits", "expected"), [
    (KEY_TO_C, ["expect[0] ('mean on every rank') supports choice b, but the key marks it wrong",
                "expect[0] ('mean on every rank') rules out choice c, but the key marks it right"]),
    (EXPECT_TO_C, ["expect[0] ('mean on every rank') supports choice c, but the key marks it wrong",
                   "expect[0] ('mean on every rank') rules out choice b, but the key marks it right"]),
], ids=["only-the-key", "only-an-expectation"])
def test_bank_verify_fails_when_key_and_binding_disagree(
    cli_env: CliRunner, session_factory: sessionmaker[Session], tmp_path: Path,
    edits: list[tuple[str, str]], expected: list[str],
) -> None:
    code, audit = _audit(cli_env, session_factory, _bank(tmp_path, *edits))
    assert code == 1 and not audit["passed"]
    # The measurement itself still agrees: only the binding fails, and it says why.
    assert all(c["passed"] for c in audit["combos"])
    messages = [p["message"] for p in audit["binding_problems"]]
    assert set(expected) <= set(messages), messages
    table = cli_env.invoke(app, ["bank", "verify", "--slug", SLUG], env={"COLUMNS": "300"})
    assert table.exit_code == 1
    assert "key binding" in table.stdout and "but the key marks it wrong" in table.stdout
    assert "0/1 questions agree with torch" in table.stdout


def test_bank_verify_passes_when_key_and_binding_change_together(
    cli_env: CliRunner, session_factory: sessionmaker[Session], tmp_path: Path
) -> None:
    # c becomes the mean (its text and the tick move together), and the binding follows.
    edits = [("The SENTINEL-RIGHT mean\n    correct: true\n", "The SENTINEL-WRONG-C local value\n"),
             ("  - text: The SENTINEL-WRONG-C local value\nexplanation",
              "  - text: The SENTINEL-RIGHT mean\n    correct: true\nexplanation"), *EXPECT_TO_C]
    code, audit = _audit(cli_env, session_factory, _bank(tmp_path, *edits))
    assert code == 0 and audit["passed"], audit


def test_an_explained_choice_needs_no_measurement(
    cli_env: CliRunner, session_factory: sessionmaker[Session], tmp_path: Path
) -> None:
    bank = _bank(tmp_path, ("rules_out: [a, c]", "rules_out: [a]"),
                 ("explanation:", "explained:\n  c: no run can show what a local value would be\n"
                                  "explanation:"))
    code, audit = _audit(cli_env, session_factory, bank)
    assert code == 0 and audit["passed"], audit
    # Without the explanation, c is unaccounted for and the audit fails.
    unexplained = _bank(tmp_path / "2", ("rules_out: [a, c]", "rules_out: [a]"))
    code, audit = _audit(cli_env, session_factory, unexplained)
    assert code == 1
    assert [p["message"] for p in audit["binding_problems"]] == [
        "choice c is marked wrong but no expectation rules it out (add it to an expectation's "
        "rules_out, or explain it under explained)"]
