"""How an exercise run executes inside its ranks (docs/exercises.md, "How a run executes"):
the learner's code and the checks apart, on real gloo ranks.

The learner's code cannot rebind what the checks read, leave before they run, patch what
they call, or call a forbidden collective; a line on the event channel that the harness
did not write marks the run tampered.
"""

from __future__ import annotations

import json
import textwrap

from app.verify.engine import Engine, Limits, RunResult
from app.verify.engine.forbid import CHECKS_MARK, compose, learner_part, split
from app.verify.engine.runner import _Capture, _Rank
from tests.verify.helpers import events

TOTAL = """
import torch
import torch.distributed as dist


def total():
    t = torch.tensor(rank + 1)
    dist.all_reduce(t)
    return int(t.item())
"""
CHECKS = """
_t = total()
report("total", _t)
report("seen", [rank, world_size, params])
"""


def _exercise(engine: Engine, code: str, checks: str = CHECKS, *, forbid: tuple[str, ...] = (),
              world_size: int = 2) -> RunResult:
    text = compose(textwrap.dedent(code), textwrap.dedent(checks), forbid=forbid)
    return engine.run(text, world_size=world_size, limits=Limits(timeout_s=5))


def test_the_checks_read_the_harness_report_and_rank_whatever_the_learner_rebinds(
    engine: Engine,
) -> None:
    result = _exercise(engine, TOTAL + """
report("total", 3)       # the learner's own report: shown, never a measurement
_real = report
def report(name, value):
    _real(name, 3)
world_size, params = 99, {"forged": True}
""")
    assert result.outcome == "ok" and result.checks_finished is True
    for rr in result.ranks:
        assert rr.values == {"total": 3, "seen": [rr.rank, 2, {}]}
        assert rr.learner_values == {"total": 3}
        assert rr.checks_done is True
    assert all(e.get("source") in ("learner", "checks") for rr in result.ranks
               for e in rr.events if e["kind"] == "report")


def test_a_snippet_without_checks_runs_as_before(engine: Engine) -> None:
    result = engine.run("report('x', rank)\n", world_size=2, limits=Limits(timeout_s=5))
    assert result.checks_finished is None and result.tampered is None
    assert [rr.values for rr in result.ranks] == [{"x": 0}, {"x": 1}]
    assert all(rr.checks_done is None and rr.learner_values == {} for rr in result.ranks)


def test_code_that_ends_early_leaves_the_checks_unrun_and_says_where(engine: Engine) -> None:
    for ending, what in (("import sys\nsys.exit(0)", "SystemExit at line 13: sys.exit(0)"),
                         ("import os\nos._exit(0)", "SystemExit at line 13: os._exit(0)"),
                         ("import posix\nposix._exit(3)", "SystemExit at line 13: os._exit(3)"),
                         ("raise KeyError('boom')", "KeyError at line 12: 'boom'")):
        result = _exercise(engine, TOTAL + "\nreport('total', 3)\n" + ending + "\n")
        assert result.checks_finished is False, ending
        assert result.checks_problem is not None
        assert "your code ended before the checks ran" in result.checks_problem
        assert what in result.checks_problem, (ending, result.checks_problem)
        assert all(rr.values == {} and rr.learner_values == {"total": 3} for rr in result.ranks)
        assert "did not finish" in result.diagnosis


def test_an_exit_inside_a_function_the_checks_call_ends_the_checks(engine: Engine) -> None:
    result = _exercise(engine, TOTAL.replace("return int(t.item())",
                                             "import os\n    os._exit(0)"))
    assert result.checks_finished is False
    assert "your code ended the run while the checks ran: SystemExit at line 10" in (
        result.checks_problem or "")
    assert all(rr.values == {} for rr in result.ranks)


def test_a_forbidden_collective_raises_in_learner_code_and_is_still_recorded(
    engine: Engine,
) -> None:
    result = _exercise(engine, TOTAL, forbid=("all_reduce",))
    assert result.checks_finished is False
    assert result.checks_problem is not None and "ForbiddenCollective at line 8" in (
        result.checks_problem)
    for rr in result.ranks:
        assert rr.error is not None and rr.error.type.endswith("ForbiddenCollective")
        assert rr.error.message == ("all_reduce is not allowed in this exercise: write it "
                                    "with send/recv")
        (start,) = [e for e in events(result, rr.rank, "collective_start") if e["op"] == "all_reduce"]
        (end,) = [e for e in events(result, rr.rank, "collective_end") if e["seq"] == start["seq"]]
        assert "ForbiddenCollective" in end["error"]
        assert start["line"] == 8


def test_the_checks_may_call_what_learner_code_may_not_and_count_its_calls(
    engine: Engine,
) -> None:
    code = """
    import torch
    import torch.distributed as dist

    class Ring:
        def total(self):
            t = torch.tensor(rank + 1)
            req = dist.isend(t.clone(), dst=(rank + 1) % world_size)
            buf = torch.empty_like(t)
            dist.recv(buf, src=(rank - 1) % world_size)
            req.wait()
            return int(t + buf)
    """
    checks = """
    import torch as _torch
    import torch.distributed as _dist
    _t = _torch.tensor(rank + 1)
    _dist.all_reduce(_t)  # the checks' own collective: allowed
    _before = learner_calls("isend", "recv")
    report("total", Ring().total())
    report("expected", int(_t))
    report("p2p", learner_calls("isend", "recv") - _before)
    """
    result = _exercise(engine, code, checks, forbid=("all_reduce",))
    assert result.checks_finished is True, result.checks_problem
    assert [rr.values for rr in result.ranks] == [{"total": 3, "expected": 3, "p2p": 2}] * 2


def test_forbidden_at_module_level_too(engine: Engine) -> None:
    result = _exercise(engine, TOTAL + "\ntotal()\n", forbid=("all_reduce",))
    assert "your code ended before the checks ran: ForbiddenCollective at line 8" in (
        result.checks_problem or "")


def test_what_learner_code_patches_is_put_back_before_the_checks_use_it(engine: Engine) -> None:
    code = TOTAL + """
import builtins
import torch
torch.allclose = lambda *a, **k: True
torch.Tensor.norm = lambda self, *a, **k: torch.tensor(1.0)
builtins.len = lambda x: 3
import torch.nn.functional as F
def total():
    F.mse_loss = lambda a, b: torch.tensor(0.0)  # patched while the checks run it
    return 3
"""
    checks = """
    import torch as _torch
    import torch.nn.functional as _F
    total()
    report("allclose", bool(_torch.allclose(_torch.zeros(2), _torch.ones(2))))
    report("norm", float(_torch.tensor([3.0, 4.0]).norm()))
    report("len", len([1]))
    report("mse", float(_F.mse_loss(_torch.zeros(1), _torch.ones(1))))
    """
    result = _exercise(engine, code, checks)
    assert result.checks_finished is True, result.checks_problem
    for rr in result.ranks:
        assert rr.values == {"allclose": False, "norm": 5.0, "len": 1, "mse": 1.0}
        notes = " ".join(e["text"] for e in rr.events if e["kind"] == "note")
        for name in ("torch.allclose", "torch.Tensor.norm", "builtins.len",
                     "torch.nn.functional.mse_loss"):
            assert name in notes


def test_a_tensor_subclass_cannot_decide_what_is_reported(engine: Engine) -> None:
    code = """
    import torch

    class Liar(torch.Tensor):
        def tolist(self):
            return [1.0, 2.0]

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if func is torch.Tensor.tolist:
                return [1.0, 2.0]
            return super().__torch_function__(func, types, args, kwargs or {})

    def value():
        return torch.zeros(2).as_subclass(Liar)
    """
    result = _exercise(engine, code, 'report("v", value())\n')
    assert [rr.values for rr in result.ranks] == [{"v": [0.0, 0.0]}] * 2


def test_the_checks_and_the_spec_are_not_on_disk_for_learner_code(engine: Engine) -> None:
    code = """
    import os
    report("files", sorted(os.listdir(".")))
    report("snippet", open("snippet.py").read())
    """
    result = _exercise(engine, code, 'report("secret", "SECRET-CHECKS")\n')
    for rr in result.ranks:
        assert ".spec.json" not in rr.learner_values["files"]
        assert "SECRET" not in rr.learner_values["snippet"]
        assert CHECKS_MARK.strip() not in rr.learner_values["snippet"]


def test_a_line_written_on_the_event_channel_by_learner_code_marks_the_run_tampered(
    engine: Engine,
) -> None:
    code = TOTAL + """
import os, sys, json, time

def _channel():
    f = sys._getframe()
    while f is not None:
        for v in list(f.f_locals.values()):
            if type(v).__name__ == "Emitter":
                return v._fd
        f = f.f_back

def total():
    line = {"kind": "report", "name": "total", "value": 3, "source": "checks",
            "iteration": None, "t": time.monotonic_ns(), "n": 1}
    os.write(_channel(), (json.dumps(line) + "\\n").encode())
    return 3
"""
    result = _exercise(engine, code)
    assert result.tampered is not None and "out of sequence" in result.tampered
    assert result.checks_finished is False
    assert "tampered" in result.diagnosis


def test_the_runner_flags_events_after_checks_done_and_lines_it_did_not_expect() -> None:
    def stream(*events: dict) -> _Rank:
        r = _Rank(0, _Capture(100), _Capture(100))
        r.feed_events(b"".join(json.dumps(e).encode() + b"\n" for e in events))
        return r

    ok = [{"kind": "started", "t": 1, "n": 0, "pid": 7},
          {"kind": "snippet_start", "t": 2, "n": 1, "checks": True},
          {"kind": "checks_start", "t": 3, "n": 2},
          {"kind": "report", "t": 4, "n": 3, "name": "x", "value": 1, "source": "checks",
           "iteration": None},
          {"kind": "checks_done", "t": 5, "n": 4}]
    assert stream(*ok).tampered is None and stream(*ok).checks_done
    late = stream(*ok, {"kind": "report", "t": 6, "n": 5, "name": "x", "value": 2,
                        "source": "checks", "iteration": None})
    assert late.tampered is not None and "after the checks had finished" in late.tampered
    unnumbered = stream(*ok[:3], {"kind": "report", "t": 4, "name": "x", "value": 1,
                                  "iteration": None})
    assert unnumbered.tampered is not None and "sequence number" in unnumbered.tampered
    r = stream(*ok[:3])
    r.feed_events(b"not json\n")
    assert r.tampered is not None and "did not write" in r.tampered
    # Without checks (a question's snippet) nothing is read as tampering.
    plain = stream({"kind": "snippet_start", "t": 1, "n": 0},
                   {"kind": "report", "t": 2, "name": "x", "value": 1, "iteration": None})
    assert plain.tampered is None


def test_the_checks_mark_splits_at_the_last_occurrence() -> None:
    text = compose("x = 1" + CHECKS_MARK + "report('fake', 1)\n", "report('real', 1)\n",
                   forbid=["all_reduce"])
    learner, checks, options = split(text) or ("", "", {})
    assert learner.endswith("report('fake', 1)\n")
    assert checks == "report('real', 1)\n"
    assert options == {"forbid": ["all_reduce"]}
    assert learner_part(text) == learner
    assert split("report('x', 1)\n") is None


def test_a_learner_s_own_reports_are_trimmed_before_the_checks_values() -> None:
    from app.verify.service import cap_result

    data = {"diagnosis": "ok", "buckets": [], "ranks": [
        {"rank": 0, "events": [], "stdout": "", "stderr": "", "values": {"checked": [1.5] * 1000},
         "learner_values": {f"mine{i}": [0.5] * 50_000 for i in range(4)}}]}
    capped = cap_result(data, limit=100_000)
    assert len(json.dumps(capped)) <= 100_000
    assert capped["ranks"][0]["values"] == {"checked": [1.5] * 1000}
    assert str(capped["ranks"][0]["learner_values"]["mine0"]).startswith("(not stored:")
