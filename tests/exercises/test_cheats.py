"""Cheats and wrong solutions sent through `POST /api/v1/exercises/{slug}/run` with an anonymous
cookie, against the bank's own exercises, with real workers on real gloo ranks: every one is
rejected and nothing is stored as an attempt.

A learner's code runs in a learner process of its own per rank (docs/exercises.md): what it
reports is only an output, compared with what the reference solution reported in the drivers
on the same secret data; the collectives it makes are performed, refused and measured by the
drivers; its memory is measured from outside. So the cheats below, each a member of a class
that once passed every check (issue 24's eight and issue 37's new classes), change nothing a
check reads.
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app.quizzes.models import Attempt
from app.settings import Settings
from app.verify.worker import Worker
from tests.databases import ONE_DATABASE
from tests.factories import REAL_BANK, count, import_folder

EXERCISES = REAL_BANK / "exercises"

# Engine runs: SQLite alone (tests/databases.py).
pytestmark = ONE_DATABASE


def _source(name: str) -> str:
    return (EXERCISES / name).read_text()


@pytest.fixture
def bank_client(app_client: TestClient, session_factory: sessionmaker[Session],
                tmp_path: Path) -> TestClient:
    """The app with the bank's exercises (only that topic) imported."""
    shutil.copytree(EXERCISES, tmp_path / "bank" / "exercises")
    import_folder(session_factory, tmp_path / "bank")
    return app_client


def _submit(client: TestClient, factory: sessionmaker[Session], settings: Settings, slug: str,
            code: str) -> dict[str, Any]:
    """Run `code` as the anonymous learner of `client`; the finished submission's JSON."""
    r = client.post(f"/api/v1/exercises/{slug}/run", json={"code": textwrap.dedent(code)})
    assert r.status_code == 200, r.text
    worker = Worker(factory, settings)
    while worker.run_once():
        pass
    body = client.get(r.json()["url"]).json()
    assert body["status"] == "done" and not body["infrastructure_failed"], body
    return body


def _rejected(body: dict[str, Any]) -> None:
    assert body["passed"] is False
    assert body["attempt_id"] is None
    visible_ok = all(c["passed"] for c in body["visible"])
    assert not visible_ok or body["hidden_passed"] < body["hidden_total"]


def _measured(body: dict[str, Any]) -> str:
    return " ".join(str(run["measured"]) for c in body["visible"] for run in c["runs"])


def _run_results(client: TestClient, body: dict[str, Any]) -> list[dict[str, Any]]:
    return [client.get(f"/api/v1/runs/{i}").json()["result"] for i in body["run_ids"]]


FIND_LINK = """
import gc, os
from app.verify.engine import wire

def _link():
    return next(o for o in gc.get_objects() if type(o).__name__ == "Link")
"""


def test_the_reference_and_the_right_solutions_pass_and_are_stored(
    bank_client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    for name in ("average_solution.py", "average_right_flat.py"):
        body = _submit(bank_client, session_factory, settings, "average-not-sum", _source(name))
        assert body["passed"] is True and body["attempt_id"] is not None, name
        assert body["graded"] is True
    assert count(session_factory, Attempt) == 2


def test_issue_24_s_cheats_on_average_not_sum_are_rejected(
    bank_client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    starter = _source("average_starter.py")
    cheats = {
        # The checks' report is not the learner's: rebinding it changes nothing they read.
        "rebinds report": starter + """
_real_report = report
def report(name, value):
    _real_report(name, [[0.0, 0.0, 0.0]])
""",
        # Reports values of its own, then leaves before the checks run.
        "reports, then os._exit(0)": starter + """
import os
report("weight_grad", [[0.0, 0.0, 0.0]])
os._exit(0)
""",
        # Patches torch's comparisons in its own process: the comparison happens in the app.
        "patches torch": starter + """
import torch
torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.Tensor.norm = lambda self, *a, **k: torch.tensor(1.0)
torch.Tensor.__eq__ = lambda self, other: torch.ones_like(self, dtype=torch.bool)
""",
        # Looks for the runner's event channel: the learner process holds none; every
        # descriptor it can write to is its pipe to the driver, which refuses the garbage.
        "writes on every descriptor": starter + """
import json, os, time
def _forge():
    line = json.dumps({"kind": "report", "name": "weight_grad", "value": [[0.0]],
                       "source": "checks", "iteration": None, "t": time.monotonic_ns()})
    for fd in range(3, 256):
        try:
            os.write(fd, (line + "\\n").encode())
        except OSError:
            pass
_forge()
""",
        # Right on 2 ranks: the hidden 3-rank checks reject it.
        "divides by 2": _source("average_wrong_divide_by_two.py"),
    }
    for name, code in cheats.items():
        body = _submit(bank_client, session_factory, settings, "average-not-sum", code)
        _rejected(body)
        if name == "reports, then os._exit(0)":
            assert "your code ended before the checks ran" in _measured(body)
        if name == "writes on every descriptor":
            assert all(r["tampered"] and "broke the protocol" in r["tampered"]
                       for r in _run_results(bank_client, body))
        if name == "divides by 2":
            assert all(c["passed"] for c in body["visible"]) and body["hidden_passed"] == 0


def test_computing_the_answer_from_the_public_seeds_and_pushing_dummy_data_is_rejected(
    bank_client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    """The checks' data used to come from fixed seeds anyone can read: this code computes every
    rank's gradient itself from those seeds, all-reduces zeros for show and writes the global
    mean. The data is now drawn per run from seeds only the drivers hold."""
    code = """
    import torch
    import torch.distributed as dist
    from torch import nn

    def sync_gradients(model):
        grads = []
        for r in range(dist.get_world_size()):
            g = torch.Generator().manual_seed(100 + r)
            x, y = torch.randn(8, 3, generator=g), torch.randn(8, 1, generator=g)
            torch.manual_seed(7)
            m = nn.Linear(3, 1)
            nn.functional.mse_loss(m(x), y).backward()
            grads.append([p.grad for p in m.parameters()])
        for i, p in enumerate(model.parameters()):
            dist.all_reduce(torch.zeros_like(p.grad))  # the collective the checks count
            p.grad.copy_(sum(g[i] for g in grads) / len(grads))
    """
    _rejected(_submit(bank_client, session_factory, settings, "average-not-sum", code))


def test_a_ring_that_calls_the_built_in_collective_is_refused_by_the_driver(
    bank_client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    body = _submit(bank_client, session_factory, settings, "ring-allreduce-send-recv",
                   _source("ring_wrong_builtin.py"))
    _rejected(body)
    assert "all_reduce is not allowed in this exercise" in _measured(body)
    (result, *_) = _run_results(bank_client, body)
    refused = [e["op"] for e in result["ranks"][0]["events"] if e["kind"] == "collective_end"
               and "ForbiddenCollective" in (e.get("error") or "")]
    assert refused == ["all_reduce"]


RULES_OFF = """
import torch.distributed as dist
from app.verify.engine import forbid


def ring_all_reduce(tensor):
    # The rules' own bookkeeping, changed from inside: it is not where the rules live.
    forbid.FORBIDDABLE.clear()
    forbid.operations = lambda names: frozenset()
    dist.all_reduce(tensor)
    return tensor
"""
OTHER_NAME = FIND_LINK + """
import torch


def ring_all_reduce(tensor):
    # A forbidden collective under another of the protocol's names, straight into the pipe.
    answer = _link().request(wire.OP, {
        "id": 10**6, "op": "allreduce_coalesced", "group": "0", "in": [["float32", [1]]],
        "out": [["float32", [1]]], "line": 1, "reduce_op": "SUM"}, [memoryview(b"\\0" * 4)])
    raise RuntimeError(answer.get("error"))
"""


@pytest.mark.parametrize("code", [RULES_OFF, OTHER_NAME])
def test_turning_the_rules_off_from_inside_changes_nothing(
    bank_client: TestClient, session_factory: sessionmaker[Session], settings: Settings,
    code: str,
) -> None:
    body = _submit(bank_client, session_factory, settings, "ring-allreduce-send-recv", code)
    _rejected(body)
    assert "is not allowed in this exercise" in _measured(body)


def test_reports_and_an_end_forged_through_the_pipe_are_outputs_that_do_not_match(
    bank_client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    """It finds the learner process's link through the garbage collector, writes the checks'
    reports itself (well-formed frames) and says the checks finished, without writing the
    function: the values are compared with the reference's on data it never saw."""
    code = FIND_LINK + """
import torch

def ring_all_reduce(tensor):
    link = _link()
    for name in ("reduced", "reduced_big_head"):
        link.send(wire.REPORT, {"name": name, "value": tensor[:256].tolist(), "source": "checks"})
    link.send(wire.REPORT, {"name": "reduced_big_sum", "value": 0.0, "source": "checks"})
    link.send(wire.END, {"ok": True})
    os._exit(0)
"""
    body = _submit(bank_client, session_factory, settings, "ring-allreduce-send-recv", code)
    _rejected(body)
    assert not any(c["passed"] for c in body["visible"] if "sum equals" in c["label"])


def test_a_thread_that_repatches_torch_and_faked_modules_change_no_measurement(
    bank_client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    """Whole tensors around the ring (N - 1 times the bytes of one), with struct and socket
    faked in sys.modules and a thread that keeps patching torch: the bytes are counted by the
    driver's kernel counters, the values compared in the app."""
    code = _source("ring_wrong_whole_tensor.py") + """
import struct, sys, threading, time, types
import torch

sys.modules["struct"] = types.SimpleNamespace(unpack_from=lambda *a: (0, 0), unpack=lambda *a: (0,))
sys.modules["socket"] = types.ModuleType("socket")

def _keep_patching():
    while True:
        torch.allclose = lambda *a, **k: True
        torch.Tensor.tolist = lambda self: [0.0]
        time.sleep(0.001)

threading.Thread(target=_keep_patching, daemon=True).start()
"""
    body = _submit(bank_client, session_factory, settings, "ring-allreduce-send-recv", code)
    _rejected(body)
    results = _run_results(bank_client, body)
    on_three = next(r for r in results if r["world_size"] == 3)
    assert all(rank["bytes_sent"] > 1.4 * rank["reference_bytes_sent"]
               for rank in on_three["ranks"])


def test_issue_24_s_checkpoint_and_join_mistakes_are_rejected(
    bank_client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    body = _submit(bank_client, session_factory, settings, "checkpoint-rank-zero",
                   _source("checkpoint_wrong_hardcoded_step.py"))
    _rejected(body)
    by_label = {c["label"]: c for c in body["visible"]}
    assert by_label["every rank resumes rank 0's trained weights"]["passed"] is False
    body = _submit(bank_client, session_factory, settings, "join-uneven-inputs",
                   _source("join_uneven_wrong_fake_batch.py"))
    _rejected(body)
    assert all(c["passed"] for c in body["visible"])
    assert body["hidden_passed"] < body["hidden_total"]


def test_issue_37_s_honest_mistakes_are_rejected(
    bank_client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    for slug, name, measure in (
            ("zero1-sharded-optimizer", "zero1_wrong_full_buffer_dataclass.py", "memory"),
            ("tensor-parallel-mlp", "tp_mlp_wrong_view_slices.py", "memory"),
            ("fsdp-flat-parameter", "fsdp_flat_wrong_originals_kept.py", "memory"),
            ("moe-all-to-all", "moe_a2a_wrong_every_token_a2a.py", "bytes")):
        body = _submit(bank_client, session_factory, settings, slug, _source(name))
        _rejected(body)
        if measure == "memory" and any("memory" in c["label"] or "keeps" in c["label"]
                                       for c in body["visible"]):
            assert "MiB" in _measured(body), (slug, body["visible"])
    body = _submit(bank_client, session_factory, settings, "zero1-sharded-optimizer",
                   _source("zero1_right_dataclass.py"))
    assert body["passed"] is True, body["visible"]


@pytest.mark.parametrize(("code", "what"), [
    ("import socket\nsocket.create_connection(('127.0.0.1', 5432))\n", "PermissionError"),
    ("import os\nos.fork()\n", "PermissionError"),
    ("import subprocess\nsubprocess.run(['sh', '-c', 'true'])\n", "PermissionError"),
])
def test_a_learner_process_that_reaches_out_fails_cleanly(
    bank_client: TestClient, session_factory: sessionmaker[Session], settings: Settings,
    code: str, what: str,
) -> None:
    body = _submit(bank_client, session_factory, settings, "average-not-sum",
                   _source("average_solution.py") + code)
    _rejected(body)
    assert what in _measured(body)


def test_a_learner_process_that_never_answers_meets_the_time_limit(
    bank_client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    code = _source("average_solution.py") + """
import threading, time
def sync_gradients(model):
    threading.Event().wait()  # never returns, never sends another frame
"""
    body = _submit(bank_client, session_factory, settings, "average-not-sum", code)
    _rejected(body)
    assert "time limit" in _measured(body)


def test_the_reference_solution_s_code_is_not_the_learner_s_to_read(
    bank_client: TestClient, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    body = _submit(bank_client, session_factory, settings, "average-not-sum",
                   _source("average_starter.py"))
    page = bank_client.get(f"/runs/{body['run_ids'][0]}").text
    api = bank_client.get(f"/api/v1/runs/{body['run_ids'][0]}").text
    for shown in (page, api):
        assert "p.grad.div_(n)" not in shown  # a line only the reference solution has
        assert "_nn.functional.mse_loss" not in shown  # the checks program's


FULL_MOMENTUM_IN_A_FILE = '''
import os
import torch
import torch.distributed as dist


class ShardedMomentumSGD:
    """Wrong on purpose: the full-size momentum, kept in a file instead of in memory."""

    def __init__(self, flat_param, lr=0.1, momentum=0.9):
        self.param = flat_param
        self.lr, self.momentum = lr, momentum
        self.n = dist.get_world_size()
        self.size = flat_param.numel() // self.n
        self.lo = dist.get_rank() * self.size
        FOLDER
        self.fd = os.open(NAME, os.O_RDWR | os.O_CREAT, 0o600)
        UNLINK
        os.pwrite(self.fd, bytes(flat_param.numel() * 4), 0)

    def step(self, flat_grad):
        grad = torch.empty(self.size, dtype=flat_grad.dtype)
        dist.reduce_scatter_tensor(grad, flat_grad.contiguous())
        grad /= self.n
        full = torch.frombuffer(bytearray(os.pread(self.fd, self.param.numel() * 4, 0)),
                                dtype=torch.float32)
        buf = full[self.lo:self.lo + self.size]
        buf.mul_(self.momentum).add_(grad)
        os.pwrite(self.fd, full.numpy().tobytes(), 0)
        del full
        mine = self.param[self.lo:self.lo + self.size]
        mine.sub_(self.lr * buf)
        dist.all_gather_into_tensor(self.param, mine.clone())
'''


@pytest.mark.parametrize(("folder", "name", "unlink"), [
    ("pass", "f'm{id(self)}'", "pass"),  # a plain file in its working folder
    ("os.makedirs('hide', 0o700, exist_ok=True)", "f'hide/m{id(self)}'", "pass"),  # a folder closed to others
    ("pass", "f'm{id(self)}'", "os.unlink(f'm{id(self)}')"),  # unlinked while open
], ids=["plain file", "closed folder", "unlinked file"])
def test_state_kept_in_files_counts_as_memory(
    bank_client: TestClient, session_factory: sessionmaker[Session], settings: Settings,
    folder: str, name: str, unlink: str,
) -> None:
    """The driver reads the run's scratch file system from outside (statvfs), so bytes the
    learner's process writes count whatever it does with the file or its folder."""
    code = (FULL_MOMENTUM_IN_A_FILE.replace("FOLDER", folder).replace("NAME", name)
            .replace("UNLINK", unlink))
    body = _submit(bank_client, session_factory, settings, "zero1-sharded-optimizer", code)
    _rejected(body)
    assert "MiB" in _measured(body), body["visible"]


CLOSED_HOLES = Path(__file__).parent.parent / "fixtures" / "closed_holes"


@pytest.mark.parametrize(("slug", "name", "what"), [
    ("replica-checksum-sdc", "sdc_frame.py", "reads the victim rank from the checks' globals"),
    ("tensor-parallel-mlp", "tp_regen.py",
     "rebuilds the full weights from the shared seed; one dummy all-reduce"),
    ("replica-checksum-sdc", "sdc_refetch.py",
     "asks the driver for a second copy of a round's tensors to compare with its own"),
], ids=["sdc_frame", "tp_regen", "sdc_refetch"])
def test_secrets_the_drivers_hold_leave_nothing_in_the_learner_process_to_read(
    bank_client: TestClient, session_factory: sessionmaker[Session], settings: Settings,
    slug: str, name: str, what: str,
) -> None:
    """Issue 37's probe: the victim rank and the tensor-parallel weights once came from a seed
    in the checks' globals. They now come from `secret_tensors`, drawn by the drivers from a
    seed no learner process holds, each key given once."""
    body = _submit(bank_client, session_factory, settings, slug, (CLOSED_HOLES / name).read_text())
    _rejected(body)
