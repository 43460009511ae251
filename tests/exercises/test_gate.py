"""The publish gate for exercises (app/verify/gate.py, shared by Publish and `bank verify`):
the reference solution must pass every check, visible and hidden, and the starter must fail
at least one. Real runs on real gloo ranks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker
from typer.testing import CliRunner

from app.cli import app
from app.db import session_scope
from app.questions.models import Question
from app.settings import Settings
from app.verify import gate, service
from app.verify.models import Verdict
from app.verify.worker import Worker
from tests.exercises.conftest import EXERCISE_BANK, SLUG, SOLUTION, STARTER
from tests.factories import import_folder


def _bank(tmp_path: Path, *, solution: str = SOLUTION, starter: str = STARTER) -> Path:
    dest = tmp_path / "bank"
    shutil.copytree(EXERCISE_BANK, dest)
    (dest / "drills" / "solution.py").write_text(solution)
    (dest / "drills" / "starter.py").write_text(starter)
    return dest


def _verify(cli: CliRunner) -> tuple[int, dict]:
    result = cli.invoke(app, ["bank", "verify", "--json"])
    (audit,) = json.loads(result.stdout)
    return result.exit_code, audit


def test_bank_verify_passes_when_the_reference_passes_and_the_starter_fails(
    cli_env: CliRunner, session_factory: sessionmaker[Session], tmp_path: Path
) -> None:
    import_folder(session_factory, _bank(tmp_path))
    code, audit = _verify(cli_env)
    assert code == 0 and audit["passed"] is True
    roles = {c["role"]: c for c in audit["combos"]}
    assert set(roles) == {"reference", "starter"}
    assert all(ch["passed"] for ch in roles["reference"]["checks"])
    assert not all(ch["passed"] for ch in roles["starter"]["checks"])
    with session_scope(session_factory) as s:
        q = s.scalar(select(Question).where(Question.slug == SLUG))
        verdict = s.scalar(select(Verdict).where(Verdict.revision_id == q.current_revision_id))
        assert verdict is not None and verdict.passed


def test_a_reference_that_fails_a_hidden_check_blocks_the_gate(
    cli_env: CliRunner, session_factory: sessionmaker[Session], tmp_path: Path
) -> None:
    # Right on rank 0 only: the visible "every rank" check and the hidden rank-1 check fail.
    wrong = SOLUTION.replace("return int(t.item())", "return int(t.item()) if rank == 0 else 0")
    import_folder(session_factory, _bank(tmp_path, solution=wrong))
    code, audit = _verify(cli_env)
    assert code != 0 and audit["passed"] is False
    reference = next(c for c in audit["combos"] if c["role"] == "reference")
    assert not reference["passed"]


def test_a_starter_that_already_passes_every_check_blocks_the_gate(
    session_factory: sessionmaker[Session], settings: Settings, tmp_path: Path
) -> None:
    import_folder(session_factory, _bank(tmp_path, starter=SOLUTION + "\n# nothing to fix\n"))
    versions = service.engine_versions()
    with session_scope(session_factory) as s:
        q = s.scalar(select(Question).where(Question.slug == SLUG))
        assert q is not None and q.current_revision is not None
        runs = gate.request_runs(db_session=s, revision=q.current_revision, versions=versions,
                                 requested_by="test")
        assert len(runs) == 2  # the reference and the starter, on the one audited combination
    worker = Worker(session_factory, settings)
    while worker.run_once():
        pass
    with session_scope(session_factory) as s:
        q = s.scalar(select(Question).where(Question.slug == SLUG))
        g = gate.check(db_session=s, revision=q.current_revision, versions=versions)
        assert g.complete and not g.passed
        assert "starter passes every check" in g.reason()
        starter = next(c for c in g.combos if c.role == gate.ROLE_STARTER)
        assert starter.all_checks_pass and not starter.passed
