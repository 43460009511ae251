"""The publish gate for exercises (app/verify/gate.py, shared by Publish and `bank verify`):
the reference solution must pass every check, visible and hidden, and the starter must fail
at least one. Real runs on real gloo ranks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker
from typer.testing import CliRunner

from app.accounts.models import User
from app.accounts.service import create_user
from app.authoring.service import PublishRefused, create_question, publish, publishable_revision
from app.cli import app
from app.db import session_scope
from app.questions.bank import load_bank
from app.questions.models import Question
from app.settings import Settings
from app.verify import gate, service
from app.verify.models import Verdict
from app.verify.worker import Worker
from tests.exercises.helpers import SLUG, SOLUTION, STARTER
from tests.factories import EXERCISE_BANK, import_folder


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


def _with_wrong(bank: Path, wrong: dict[str, str]) -> Path:
    """The fixture exercise with these known-wrong solutions (file -> code) beside it."""
    path = bank / "drills" / "fixture-exercise.yaml"
    data = yaml.safe_load(path.read_text())
    data["exercise"]["wrong"] = [{"file": name, "why": f"planted: {name}"} for name in wrong]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    for name, code in wrong.items():
        (bank / "drills" / name).write_text(code)
    return bank


ON_RANK_0_ONLY = SOLUTION.replace("return int(t.item())", "return int(t.item()) if rank == 0 else 0")


def test_every_wrong_solution_runs_on_every_combination_and_must_fail_a_check(
    cli_env: CliRunner, session_factory: sessionmaker[Session], tmp_path: Path
) -> None:
    import_folder(session_factory, _with_wrong(_bank(tmp_path), {
        "wrong_rank0.py": ON_RANK_0_ONLY, "wrong_float.py": SOLUTION.replace(
            "return int(t.item())", "return float(t.item())")}))
    code, audit = _verify(cli_env)
    assert code == 0 and audit["passed"] is True and audit["problems"] == []
    wrong = [c for c in audit["combos"] if c["role"] == "wrong"]
    assert sorted(c["wrong"]["file"] for c in wrong) == ["wrong_float.py", "wrong_rank0.py"]
    # Each fails a check on its one combination: that is what the gate needs of it.
    assert all(c["passed"] and not all(ch["passed"] for ch in c["checks"]) for c in wrong)


def test_a_wrong_solution_that_passes_fails_bank_verify_naming_it(
    cli_env: CliRunner, session_factory: sessionmaker[Session], tmp_path: Path
) -> None:
    import_folder(session_factory, _with_wrong(_bank(tmp_path), {
        "wrong_rank0.py": ON_RANK_0_ONLY, "wrong_but_passes.py": SOLUTION + "# looks wrong\n"}))
    code, audit = _verify(cli_env)
    assert code != 0 and audit["passed"] is False
    (problem,) = audit["problems"]
    assert "wrong_but_passes.py" in problem and "planted: wrong_but_passes.py" in problem
    table = cli_env.invoke(app, ["bank", "verify"], env={"COLUMNS": "500"})
    assert table.exit_code != 0
    assert "wrong_but_passes.py passes every check" in " ".join(table.stdout.split())
    assert "wrong wrong_rank0.py (the wrong solution fails a check" in " ".join(
        table.stdout.split())


def test_a_wrong_solution_that_passes_blocks_publishing_naming_it(
    session_factory: sessionmaker[Session], settings: Settings, tmp_path: Path
) -> None:
    bank = load_bank(_with_wrong(_bank(tmp_path), {"wrong_but_passes.py": SOLUTION + "#\n"}))
    (doc,) = bank.questions
    versions = service.engine_versions()
    with session_scope(session_factory) as s:
        author = create_user(db_session=s, username="author", password="a long password",
                             role="author")
        question = create_question(db_session=s, doc=doc.model_copy(update={"slug": "drill-2"}),
                                   user=author)
        draft = publishable_revision(db_session=s, question=question)
        assert draft is not None
        runs = gate.request_runs(db_session=s, revision=draft, versions=versions,
                                 requested_by="test")
        assert len(runs) == 3  # the reference, the starter and the wrong solution
    worker = Worker(session_factory, settings)
    while worker.run_once():
        pass
    with session_scope(session_factory) as s:
        author = s.scalar(select(User).where(User.username == "author"))
        question = s.scalar(select(Question).where(Question.slug == "drill-2"))
        assert author is not None and question is not None
        draft = publishable_revision(db_session=s, question=question)
        assert draft is not None
        g = gate.check(db_session=s, revision=draft, versions=versions)
        assert g.complete and not g.passed
        assert g.problems() == ["the wrong solution wrong_but_passes.py passes every check on "
                                "every knob combination (planted: wrong_but_passes.py)"]
        with pytest.raises(PublishRefused, match=r"wrong_but_passes\.py passes every check"):
            publish(db_session=s, question=question, user=author, versions=versions)


def _on_two_world_sizes(bank: Path) -> Path:
    """The fixture exercise audited on 2 and 3 ranks (totals 3 and 6)."""
    path = bank / "drills" / "fixture-exercise.yaml"
    data = yaml.safe_load(path.read_text())
    data["verify"]["knobs"] = {"world_size": {"values": [2, 3], "default": 2}}
    data["verify"]["audit"] = "all"
    data["verify"]["expect"] = [
        {"label": "the total of 2 ranks", "when": {"world_size": 2},
         "value": {"name": "total", "equals": 3}},
        {"label": "the total of 3 ranks", "when": {"world_size": 3},
         "value": {"name": "total", "equals": 6}}]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return bank


def test_bank_verify_runs_a_wrong_solution_further_only_where_its_first_combination_passed(
    cli_env: CliRunner, session_factory: sessionmaker[Session], tmp_path: Path
) -> None:
    """One failing combination shows a wrong solution wrong: the audit runs the others only
    for code that passed its first, and a solution that passes them all is still named."""
    import_folder(session_factory, _with_wrong(_on_two_world_sizes(_bank(tmp_path)), {
        "wrong_rank0.py": ON_RANK_0_ONLY,
        "wrong_two_ranks_only.py": "def rank_total():\n    return 3\n",
        "wrong_but_passes.py": SOLUTION + "# looks wrong\n"}))
    code, audit = _verify(cli_env)
    assert code != 0 and audit["passed"] is False
    by = {}
    for c in audit["combos"]:
        by.setdefault(c["wrong"]["file"] if c["role"] == "wrong" else c["role"], []).append(c)
    ran = {name: [c["world_size"] for c in combos if c["run_id"] is not None]
           for name, combos in by.items()}
    # The reference on both; the starter (it returns 0) and wrong_rank0 fail on 2 ranks, so
    # their 3-rank runs are not needed; the other two passed on 2 ranks and ran on 3 too.
    assert ran == {"reference": [2, 3], "starter": [2], "wrong_rank0.py": [2],
                   "wrong_two_ranks_only.py": [2, 3], "wrong_but_passes.py": [2, 3]}
    assert [c.get("needless", False) for c in by["wrong_rank0.py"]] == [False, True]
    assert [c["passed"] for c in by["wrong_two_ranks_only.py"]] == [False, True]
    (problem,) = audit["problems"]
    assert "wrong_but_passes.py" in problem
    # Fixed, it passes: no run of a needless combination is asked for on the way.
    import_folder(session_factory, _with_wrong(_on_two_world_sizes(_bank(tmp_path / "again")), {
        "wrong_rank0.py": ON_RANK_0_ONLY,
        "wrong_two_ranks_only.py": "def rank_total():\n    return 3\n"}))
    code, audit = _verify(cli_env)
    assert code == 0 and audit["passed"] is True, audit["problems"]
    table = cli_env.invoke(app, ["bank", "verify", "--all"], env={"COLUMNS": "500"})
    assert table.exit_code == 0 and "not needed" in " ".join(table.stdout.split())
