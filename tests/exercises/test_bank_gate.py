"""The bank's three repaired exercises through the gate, on real gloo ranks: the reference
passes every check, and the starter and every known-wrong solution fail one somewhere.
(`ddpdrill bank verify` runs the same gate for all twelve; see docs/exercises.md.)"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.db import session_scope
from app.questions.models import Question
from app.settings import Settings
from app.verify import gate, service
from app.verify.worker import Worker
from tests.databases import ONE_DATABASE
from tests.factories import REAL_BANK, import_folder

# Engine runs: SQLite alone (tests/databases.py).
pytestmark = ONE_DATABASE


@pytest.mark.slow
@pytest.mark.parametrize("slug", ["ring-allreduce-send-recv", "checkpoint-rank-zero",
                                  "join-uneven-inputs"])
def test_a_repaired_exercise_rejects_each_of_its_known_wrong_solutions(
    slug: str, session_factory: sessionmaker[Session], settings: Settings, tmp_path: Path
) -> None:
    shutil.copytree(REAL_BANK / "exercises", tmp_path / "bank" / "exercises")
    import_folder(session_factory, tmp_path / "bank")
    versions = service.engine_versions()
    with session_scope(session_factory) as s:
        q = s.scalar(select(Question).where(Question.slug == slug))
        assert q is not None and q.current_revision is not None
        gate.request_runs(db_session=s, revision=q.current_revision, versions=versions,
                          requested_by="test")
    worker = Worker(session_factory, settings)
    while worker.run_once():
        pass
    with session_scope(session_factory) as s:
        q = s.scalar(select(Question).where(Question.slug == slug))
        assert q is not None and q.current_revision is not None
        g = gate.check(db_session=s, revision=q.current_revision, versions=versions)
        assert g.complete and g.problems() == []
        assert g.passed, g.reason()
        wrong = g.wrong_solutions()
        assert len(wrong) >= 3
        for w, combos in wrong:
            assert any(c.passed for c in combos), w.file
