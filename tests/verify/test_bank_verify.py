"""`ddpdrill bank verify`: every expectation against real runs, verdicts stored per revision."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker
from typer.testing import CliRunner

from app.cli import app
from app.db import session_scope
from app.questions.bank import load_bank
from app.questions.models import Question
from app.questions.service import import_bank
from app.verify.models import Run, Verdict
from tests.factories import FIXTURE_BANK


def load(factory: sessionmaker[Session], root: Path) -> None:
    bank = load_bank(root)
    assert bank.ok, bank.errors
    with session_scope(factory) as s:
        import_bank(db_session=s, bank=bank)


def test_bank_verify_passes_and_records_a_verdict(
    cli_env: CliRunner, session_factory: sessionmaker[Session]
) -> None:
    load(session_factory, FIXTURE_BANK)
    result = cli_env.invoke(app, ["bank", "verify", "--json"])
    assert result.exit_code == 0, result.output
    audit = json.loads(result.stdout)
    assert [a["slug"] for a in audit] == ["fixture-single"]
    combos = audit[0]["combos"]
    assert sorted(c["params"]["scale"] for c in combos) == [1, 2]  # audit: all
    assert all(c["passed"] for c in combos)
    with session_scope(session_factory) as s:
        q = s.scalar(select(Question).where(Question.slug == "fixture-single"))
        verdict = s.scalar(select(Verdict).where(Verdict.revision_id == q.current_revision_id))
        assert verdict is not None and verdict.passed and verdict.torch_version.startswith("2.13.0")
        runs_before = s.scalar(select(func.count()).select_from(Run))
    # A second audit is answered from the cache: no new run executes.
    again = cli_env.invoke(app, ["bank", "verify"])
    assert again.exit_code == 0, again.output
    assert "1/1 questions agree with torch" in again.stdout
    # A question that agrees is one row; --all lists each of its checks.
    assert "2 combinations" in again.stdout and "mean on every rank" not in again.stdout
    every = cli_env.invoke(app, ["bank", "verify", "--all"], env={"COLUMNS": "300"})
    assert every.exit_code == 0, every.output
    assert "mean on every rank" in every.stdout and "2 combinations" not in every.stdout
    with session_scope(session_factory) as s:
        assert s.scalar(select(func.count()).select_from(Run)) == runs_before


def test_bank_verify_fails_when_an_answer_key_disagrees_with_torch(
    cli_env: CliRunner, session_factory: sessionmaker[Session], tmp_path: Path
) -> None:
    bank = tmp_path / "bank"
    shutil.copytree(FIXTURE_BANK, bank)
    path = bank / "basics" / "fixture-single.yaml"
    path.write_text(path.read_text().replace("equals: 1.5", "equals: 3.0"))
    load(session_factory, bank)
    result = cli_env.invoke(app, ["bank", "verify"])
    assert result.exit_code == 1
    assert "FAIL" in result.stdout and "fixture-single" in result.output
    with session_scope(session_factory) as s:
        assert s.scalar(select(Verdict.passed)) is False


def test_bank_verify_fresh_executes_again(
    cli_env: CliRunner, session_factory: sessionmaker[Session]
) -> None:
    load(session_factory, FIXTURE_BANK)
    first = cli_env.invoke(app, ["bank", "verify", "--slug", "fixture-single"])
    assert first.exit_code == 0, first.output
    fresh = cli_env.invoke(app, ["bank", "verify", "--slug", "fixture-single", "--fresh"])
    assert fresh.exit_code == 0, fresh.output
    with session_scope(session_factory) as s:
        assert s.scalar(select(func.count()).select_from(Run)) == 4  # 2 combinations, twice
        assert s.scalar(select(func.count()).select_from(Run).where(Run.live.is_(True))) == 2


def test_bank_verify_unknown_slug_exits_1(cli_env: CliRunner, session_factory: sessionmaker[Session]) -> None:
    load(session_factory, FIXTURE_BANK)
    assert cli_env.invoke(app, ["bank", "verify", "--slug", "nope"]).exit_code == 1
