"""Holes an attacker's probe of the exercise driver found on 2026-12-06 that are still open,
kept as the code that got through (tests/fixtures/open_holes/), so that the next change can
close each and watch it flip. Each is `xfail(strict=False)`: it is expected to pass grading
today, which is the defect; pytest's summary lists an XPASS the day one is rejected (or, for
the right solution, accepted), and its mark should then go.

Weaknesses, in the probe's order of importance:
1. The checks program runs in the learner's process, so its globals (`mark_memory` itself)
   are the learner's to read and rebind. (Secrets no longer are: the victim rank and the
   tensor-parallel weights come from the drivers' `secret_tensors`, and the cheats that read
   them are rejected in tests/exercises/test_cheats.py.)
2. Pages never touched are not resident: `torch.empty` of a full-size buffer of which one
   slice is written escapes the memory bound. (Counting mapped memory, VmData, catches it but
   adds a megabyte of noise from Python's 1 MiB small-object arenas: a right solution then
   measured 3.79 MiB against a bound of 3.81.)
3. (Closed: the vocabulary-parallel loss bounds its bytes, and the ring all-reduce checks that
   each rank sends only to the next rank; both cheats are wrong solutions of the bank now.)
4. (Closed: a right ZeRO-1 solution with async operations measured about a megabyte more
   than the reference and sometimes failed a bound 0.8 MiB above it; the exercise's state is
   now 8 MiB, its bounds 1.5 MiB from the right solutions and 2.5 MiB from the wrong ones,
   and the solution is held to passing below.)
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app.settings import Settings
from tests.databases import ONE_DATABASE
from tests.exercises.test_cheats import _submit, bank_client  # noqa: F401 - a fixture

HOLES = Path(__file__).parent.parent / "fixtures" / "open_holes"

pytestmark = ONE_DATABASE

CHEATS = [
    ("zero1-sharded-optimizer", "zero1_empty_full.py",
     "a full-size momentum from torch.empty, only its slice touched"),
    ("zero1-sharded-optimizer", "zero1_markwrap.py",
     "rebinds the checks' mark_memory to drop the full buffer while it is measured"),
    ("sampler-shard-padding", "sampler_restore.py",
     "keeps DistributedSampler.__iter__ from before the checks replace it"),
]


@pytest.mark.parametrize(("slug", "name", "what"), CHEATS, ids=[c[1] for c in CHEATS])
@pytest.mark.xfail(strict=False, reason="an open hole: this cheat passes grading today")
def test_an_open_hole_is_rejected(
    bank_client: TestClient, session_factory: sessionmaker[Session],  # noqa: F811
    settings: Settings, slug: str, name: str, what: str,
) -> None:
    body = _submit(bank_client, session_factory, settings, slug, (HOLES / name).read_text())
    assert body["passed"] is False, what


def test_a_right_zero1_solution_with_temporary_buffers_passes(
    bank_client: TestClient, session_factory: sessionmaker[Session],  # noqa: F811
    settings: Settings,
) -> None:
    for _ in range(3):
        body = _submit(bank_client, session_factory, settings, "zero1-sharded-optimizer",
                       (HOLES / "zero1_right_async.py").read_text())
        assert body["passed"] is True, body["visible"]
