"""The gate on a question with variables: `bank verify` and Publish run every variant on real
gloo ranks, and a variant whose measurement disagrees with its formula fails by name."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker
from typer.testing import CliRunner

from app.accounts.models import User
from app.accounts.service import create_user
from app.authoring.service import PublishRefused, publish
from app.cli import app
from app.db import session_scope
from app.questions.bank import load_bank
from app.questions.models import Question
from app.questions.service import append_revision
from app.settings import Settings
from app.verify import gate, service
from app.verify.models import Verdict
from app.verify.worker import Worker
from tests.factories import TESTS
from tests.verify.test_bank_verify import load

VARIANT_BANK = TESTS / "fixtures" / "variant_bank"
SLUG = "allreduce-bytes-per-rank"
RIGHT = "per_rank_bytes: plan_ring_all_reduce_bytes(mib * 2**20, ranks=world_size)"
# Right for two ranks only: on four a rank sends 1.5 times the buffer, not the buffer.
WRONG = "per_rank_bytes: (2 * (world_size - 1) / world_size if world_size == 2 else 1) * mib * 2**20"


def wrong_bank(tmp_path: Path) -> Path:
    bank = tmp_path / "bank"
    shutil.copytree(VARIANT_BANK, bank)
    path = bank / "measured" / f"{SLUG}.yaml"
    text = path.read_text()
    assert RIGHT in text
    path.write_text(text.replace(RIGHT, WRONG))
    return bank


def test_bank_verify_audits_every_variant_with_its_ranks_and_params(
    cli_env: CliRunner, session_factory: sessionmaker[Session],
) -> None:
    load(session_factory, VARIANT_BANK)
    result = cli_env.invoke(app, ["bank", "verify", "--json"])
    assert result.exit_code == 0, result.output
    [audit] = json.loads(result.stdout)  # the only question with a snippet
    assert audit["slug"] == SLUG and audit["passed"]
    combos = audit["combos"]
    assert [c["variant"] for c in combos] == [0, 1, 2, 3]
    assert [c["variant_params"] for c in combos] == [
        {"world_size": w, "mib": m} for w in (2, 4) for m in (1, 4)]
    assert [c["world_size"] for c in combos] == [2, 2, 4, 4]
    assert all(c["params"] == c["variant_params"] for c in combos)
    assert all(c["passed"] and len(c["checks"]) == 4 for c in combos)
    with session_scope(session_factory) as s:
        assert s.scalar(select(Verdict.passed)) is True


def test_a_variant_torch_disagrees_with_fails_bank_verify_by_name(
    cli_env: CliRunner, session_factory: sessionmaker[Session], tmp_path: Path,
) -> None:
    bank = wrong_bank(tmp_path)
    # The key and its check agree on paper, so `bank check` cannot tell ...
    assert load_bank(bank).ok
    load(session_factory, bank)
    result = cli_env.invoke(app, ["bank", "verify", "--json"])
    assert result.exit_code == 1
    [audit] = json.loads(result.stdout)
    # ... only the runs on four ranks, which send 1.5 times the buffer, can.
    assert [(c["variant"], c["passed"]) for c in audit["combos"]] == [
        (0, True), (1, True), (2, False), (3, False)]
    failed = [x for c in audit["combos"] for x in c["checks"] if not x["passed"]]
    assert [x["label"] for x in failed] == ["each rank sends the ring's share of the buffer"] * 2
    versions = service.engine_versions()
    with session_scope(session_factory) as s:
        q = s.scalar(select(Question).where(Question.slug == SLUG))
        assert q is not None and q.current_revision is not None
        g = gate.check(db_session=s, revision=q.current_revision, versions=versions)
        assert not g.passed
        assert g.reason() == ("2 knob combinations fail their expectations: "
                              "variant 3 (world_size=4, mib=1); variant 4 (world_size=4, mib=4)")


@pytest.fixture
def admin(session_factory: sessionmaker[Session]) -> int:
    with session_scope(session_factory) as s:
        return create_user(db_session=s, username="admin1", password="a long enough password",
                           role="admin").id


def test_publish_refuses_a_draft_whose_variant_disagrees_with_torch(
    session_factory: sessionmaker[Session], settings: Settings, tmp_path: Path, admin: int,
) -> None:
    load(session_factory, VARIANT_BANK)
    [draft] = [q for q in load_bank(wrong_bank(tmp_path)).questions if q.slug == SLUG]
    versions = service.engine_versions()
    with session_scope(session_factory) as s:
        q = s.scalar(select(Question).where(Question.slug == SLUG))
        assert q is not None
        rev = append_revision(db_session=s, question=q, doc=draft, source="editor")
        q.draft_revision_id = rev.id
        runs = gate.request_runs(db_session=s, revision=rev, versions=versions, requested_by="test")
        assert len(runs) == 4
    worker = Worker(session_factory, settings)
    while worker.run_once():
        pass
    with session_scope(session_factory) as s:
        q = s.scalar(select(Question).where(Question.slug == SLUG))
        user = s.get(User, admin)
        assert q is not None and user is not None
        with pytest.raises(PublishRefused) as refused:
            publish(db_session=s, question=q, user=user, versions=versions)
    assert "variant 3 (world_size=4, mib=1); variant 4 (world_size=4, mib=4)" in str(refused.value)
