"""Wrong solutions and cheats an attacker sent through `POST /api/v1/exercises/{slug}/run` with
an anonymous cookie, against the bank's own exercises, with real workers on real gloo ranks:
each used to pass every check (hidden ones included) and be stored as a correct attempt.
Now each is rejected, and nothing is stored.

The cheats report exactly the values the reference solution reports (read back from its
run), so only the mechanism stands between them and a pass: the checks' own namespace and
`report`, the checks running only after the learner's code ended normally, the harness
putting back what learner code patched, and the sequence-numbered event channel.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.db import session_scope
from app.exercises.service import REFERENCE_REQUESTER
from app.quizzes.models import Attempt
from app.settings import Settings
from app.verify.models import Run
from app.verify.worker import Worker
from tests.factories import REAL_BANK, count, import_folder

EXERCISES = REAL_BANK / "exercises"


def _source(name: str) -> str:
    return (EXERCISES / name).read_text()


@pytest.fixture
def bank_client(app_client: TestClient, session_factory: sessionmaker[Session],
                tmp_path: Path) -> TestClient:
    """The app with the bank's exercises (only that topic) imported."""
    shutil.copytree(EXERCISES, tmp_path / "bank" / "exercises")
    import_folder(session_factory, tmp_path / "bank")
    return app_client


def _drain(factory: sessionmaker[Session], settings: Settings) -> None:
    worker = Worker(factory, settings)
    while worker.run_once():
        pass


def _submit(client: TestClient, factory: sessionmaker[Session], settings: Settings, slug: str,
            code: str) -> dict[str, Any]:
    """Run `code` as the anonymous learner of `client`; the finished submission's JSON."""
    r = client.post(f"/api/v1/exercises/{slug}/run", json={"code": code})
    assert r.status_code == 200, r.text
    _drain(factory, settings)
    body = client.get(r.json()["url"]).json()
    assert body["status"] == "done" and not body["infrastructure_failed"], body
    return body


def _rejected(body: dict[str, Any]) -> None:
    assert body["passed"] is False
    assert body["attempt_id"] is None
    visible_ok = all(c["passed"] for c in body["visible"])
    assert not visible_ok or body["hidden_passed"] < body["hidden_total"]


def _reference_values(factory: sessionmaker[Session]) -> dict[int, list[dict[str, Any]]]:
    """world size -> each rank's reported values, from the reference solution's runs."""
    with session_scope(factory) as s:
        runs = s.scalars(select(Run).where(Run.requested_by == REFERENCE_REQUESTER)).all()
        return {run.world_size: [rank["values"] for rank in run.result["ranks"]] for run in runs}


def _run_result(client: TestClient, body: dict[str, Any]) -> list[dict[str, Any]]:
    return [client.get(f"/api/v1/runs/{i}").json()["result"] for i in body["run_ids"]]


def test_a_ring_that_calls_all_reduce_is_rejected(
    bank_client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    body = _submit(bank_client, session_factory, settings, "ring-allreduce-send-recv",
                   _source("ring_wrong_builtin.py"))
    _rejected(body)
    assert all(not c["passed"] for c in body["visible"])
    assert "ForbiddenCollective" in body["visible"][0]["runs"][0]["measured"]
    assert "all_reduce is not allowed in this exercise" in body["visible"][0]["runs"][0]["measured"]
    # The probes still recorded the call it tried.
    (result, *_) = _run_result(bank_client, body)
    ops = [e["op"] for e in result["ranks"][0]["events"] if e["kind"] == "collective_end"
           and "ForbiddenCollective" in (e.get("error") or "")]
    assert ops == ["all_reduce"]
    assert count(session_factory, Attempt) == 0


def test_a_ring_that_calls_the_gloo_backend_itself_is_rejected(
    bank_client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    """The backend's own allreduce skips torch.distributed and the dispatcher: it is probed
    and forbidden all the same."""
    code = """import torch
import torch.distributed as dist


def ring_all_reduce(tensor):
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    backend.allreduce([tensor]).wait()
    return tensor
"""
    body = _submit(bank_client, session_factory, settings, "ring-allreduce-send-recv", code)
    _rejected(body)
    assert "all_reduce is not allowed in this exercise" in body["visible"][0]["runs"][0]["measured"]
    (result, *_) = _run_result(bank_client, body)
    apis = [e.get("api") for e in result["ranks"][0]["events"] if e["kind"] == "collective_end"
            or e["kind"] == "collective_start"]
    assert "Backend.allreduce" in apis
    assert count(session_factory, Attempt) == 0


@pytest.mark.parametrize("switch_off", [
    "forbid._forbidden = frozenset()",
    "forbid._depth = 0",
    "forbid.configure([])",
])
def test_a_ring_that_switches_the_rules_off_is_rejected(
    bank_client: TestClient, session_factory: sessionmaker[Session], settings: Settings,
    switch_off: str,
) -> None:
    """The rules live in a module learner code can import: changing its state fails the run."""
    code = f"""import torch.distributed as dist
from app.verify.engine import forbid


def ring_all_reduce(tensor):
    {switch_off}
    dist.all_reduce(tensor)
    return tensor
"""
    body = _submit(bank_client, session_factory, settings, "ring-allreduce-send-recv", code)
    _rejected(body)
    assert all(not c["passed"] for c in body["visible"])
    assert "RulesChanged" in body["visible"][0]["runs"][0]["measured"]
    assert count(session_factory, Attempt) == 0


def test_a_checkpoint_that_never_loads_and_writes_on_every_rank_is_rejected(
    bank_client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    body = _submit(bank_client, session_factory, settings, "checkpoint-rank-zero",
                   _source("checkpoint_wrong_hardcoded_step.py"))
    _rejected(body)
    by_label = {c["label"]: c for c in body["visible"]}
    assert by_label["every rank resumes at step 5"]["passed"] is True
    assert by_label["every rank resumes rank 0's trained weights"]["passed"] is False
    assert body["hidden_passed"] < body["hidden_total"]  # rank 1 wrote a file


def test_a_join_replaced_by_an_all_zero_batch_is_rejected(
    bank_client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    body = _submit(bank_client, session_factory, settings, "join-uneven-inputs",
                   _source("join_uneven_wrong_fake_batch.py"))
    _rejected(body)
    # It finishes and trains rank 0 three times: only the trained weights give it away.
    assert all(c["passed"] for c in body["visible"])
    assert body["hidden_passed"] < body["hidden_total"]


STARTER_AVERAGE = _source("average_starter.py")


def _with_expected(expected: dict[int, list[dict[str, Any]]], code: str) -> str:
    # What the reference reports on rank 0 (every rank reports the same gradient).
    table = {ws: {k: v for k, v in ranks[0].items() if k in ("weight_grad", "bias_grad")}
             for ws, ranks in expected.items()}
    return f"EXPECTED = {json.dumps(table)}\n" + code


def test_cheats_on_average_not_sum_are_rejected_and_never_stored(
    bank_client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    slug = "average-not-sum"
    solved = _submit(bank_client, session_factory, settings, slug, _source("average_solution.py"))
    assert solved["passed"] is True and solved["attempt_id"] is not None
    expected = _reference_values(session_factory)
    assert set(expected) == {2, 3}

    rebinds_report = _with_expected(expected, STARTER_AVERAGE + """
_real_report = report


def report(name, value):
    # The checks used to run in this namespace: every value they reported came through here.
    _real_report(name, EXPECTED[str(world_size)].get(name, value))
""")
    reports_then_exits = _with_expected(expected, STARTER_AVERAGE + """
import os

for _name, _value in EXPECTED[str(world_size)].items():
    report(_name, _value)
os._exit(0)
""")
    patches_torch = STARTER_AVERAGE + """
import torch
import torch.distributed
import torch.nn.functional as F

torch.allclose = lambda *a, **k: True
torch.Tensor.norm = lambda self, *a, **k: torch.tensor(1.0)
_mse = F.mse_loss
# Scaled so that the starter's sum over ranks comes out as the mean.
F.mse_loss = lambda a, b, **k: _mse(a, b, **k) / torch.distributed.get_world_size()
"""
    forges_after_checks = _with_expected(expected, STARTER_AVERAGE + """
import json
import os
import sys
import time


def _channel():
    frame = sys._getframe()
    while frame is not None:
        for value in list(frame.f_locals.values()):
            if isinstance(getattr(value, "_fd", None), int) and hasattr(value, "emit"):
                return value._fd
        frame = frame.f_back


_fd = _channel()


def _forge():
    for name, value in EXPECTED[str(world_size)].items():
        line = {"kind": "report", "name": name, "value": value, "source": "checks",
                "iteration": None, "t": time.monotonic_ns()}
        os.write(_fd, (json.dumps(line) + "\\n").encode())


_flush = sys.stdout.flush


def _after_the_checks():
    _forge()
    return _flush()


sys.stdout.flush = _after_the_checks
""")
    forges_during_checks = forges_after_checks.replace(
        "            dist.all_reduce(p.grad)", "            dist.all_reduce(p.grad)\n    _forge()")
    assert forges_during_checks != forges_after_checks
    shadows_tolist = _with_expected(expected, STARTER_AVERAGE + """
import torch

_tolist = torch.Tensor.tolist


def _reported(self):
    # The grads the checks report become the reference's, whatever this code computed.
    for name, value in EXPECTED[str(world_size)].items():
        if list(self.shape) == list(torch.tensor(value).shape):
            return value
    return _tolist(self)


torch.Tensor.tolist = _reported
""")
    divides_by_two = _source("average_wrong_divide_by_two.py")

    for name, code in [("rebinds report", rebinds_report),
                       ("reports, then os._exit(0)", reports_then_exits),
                       ("patches torch", patches_torch),
                       ("forges events after the checks", forges_after_checks),
                       ("forges events during the checks", forges_during_checks),
                       ("shadows Tensor.tolist", shadows_tolist),
                       ("divides by 2", divides_by_two)]:
        body = _submit(bank_client, session_factory, settings, slug, code)
        assert body["passed"] is False, name
        assert body["attempt_id"] is None, name
        results = _run_result(bank_client, body)
        if name == "reports, then os._exit(0)":
            assert all("your code ended before the checks ran" in c["runs"][0]["measured"]
                       for c in body["visible"])
        if name == "patches torch":
            notes = " ".join(e["text"] for e in results[0]["ranks"][0]["events"]
                             if e["kind"] == "note")
            assert "torch.nn.functional.mse_loss" in notes and "torch.allclose" in notes
        if name == "shadows Tensor.tolist":
            notes = " ".join(e["text"] for e in results[0]["ranks"][0]["events"]
                             if e["kind"] == "note")
            assert "torch.Tensor.tolist" in notes
        if name == "forges events during the checks":
            assert all(r["tampered"] for r in results)
            assert all("tampered" in c["runs"][0]["measured"] for c in body["visible"])
        if name == "divides by 2":
            # Right on 2 ranks: the hidden 3-rank checks reject it.
            assert all(c["passed"] for c in body["visible"])
            assert body["hidden_passed"] == 0
    assert count(session_factory, Attempt) == 1  # the reference solution's, nothing else


def test_the_reference_solution_s_runs_are_not_the_learner_s_to_read(
    bank_client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    _submit(bank_client, session_factory, settings, "average-not-sum",
            _source("average_starter.py"))
    with session_scope(session_factory) as s:
        ids = s.scalars(select(Run.id).where(Run.requested_by == REFERENCE_REQUESTER)).all()
    assert ids
    for run_id in ids:
        # Its values are what the hidden checks compare with, and its code is the solution.
        assert bank_client.get(f"/api/v1/runs/{run_id}").status_code == 404
        assert bank_client.get(f"/runs/{run_id}").status_code == 404
