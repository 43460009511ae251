"""How an exercise run executes (docs/exercises.md, "How a run executes"): per rank a driver on
the real gloo group and a confined learner process that reaches it only through its pipe, on
real gloo ranks in the sandbox.

What the learner process reports is only an output: the checks compare it with what the
reference solution reported in the drivers on the same secret data, and with what the drivers
measured (collectives, bytes, memory); nothing in the learner process can reach the drivers.
"""

from __future__ import annotations

import json
import textwrap

from app.verify.engine import Engine, Limits, RunResult
from app.verify.engine.forbid import CHECKS_MARK, compose, learner_part, split
from tests.verify.helpers import events

TOTAL = """
import torch
import torch.distributed as dist


def total(x):
    t = x.clone()
    dist.all_reduce(t)
    return t
"""
CHECKS = """
import torch as _torch
_x = _torch.randn(4, generator=_torch.Generator().manual_seed(rank_seed))
report("total", total(_x))
report("seen", [rank, world_size, params])
"""


def _exercise(engine: Engine, code: str, checks: str = CHECKS, *, forbid: tuple[str, ...] = (),
              world_size: int = 2, reference: str | None = TOTAL, timeout_s: float = 10,
              shared_folder: bool = False) -> RunResult:
    text = compose(textwrap.dedent(code), textwrap.dedent(checks), forbid=forbid,
                   reference=textwrap.dedent(reference) if reference is not None else None,
                   shared_folder=shared_folder)
    return engine.run(text, world_size=world_size, limits=Limits(timeout_s=timeout_s))


def test_the_checks_report_outputs_that_the_drivers_compare_with_the_reference_on_secret_data(
    engine: Engine,
) -> None:
    result = _exercise(engine, TOTAL + """
report("total", [3.0])  # the learner's own report: shown, never a measurement
world_size, params = 99, {"forged": True}
""")
    assert result.outcome == "ok" and result.checks_finished is True, result.diagnosis
    assert result.learner_confined is True
    totals = []
    for rr in result.ranks:
        assert rr.values["seen"] == [rr.rank, 2, {}]
        assert rr.values["total"] == rr.reference_values["total"]
        assert rr.learner_values == {"total": [3.0]}
        assert rr.checks_done is True and rr.learner_confined is True
        # The reference's all-reduce went over gloo in the drivers too: the same bytes.
        assert rr.bytes_sent > 0 and rr.reference_bytes_sent == rr.bytes_sent
        totals.append(rr.values["total"])
    assert totals[0] == totals[1]
    # A new secret for every run: the learner cannot know another rank's data in advance.
    again = _exercise(engine, TOTAL)
    assert again.ranks[0].values["total"] != totals[0]


def test_a_snippet_without_checks_runs_as_before(engine: Engine) -> None:
    result = engine.run("report('x', rank)\n", world_size=2, limits=Limits(timeout_s=5))
    assert result.checks_finished is None and result.tampered is None
    assert result.learner_confined is None
    assert [rr.values for rr in result.ranks] == [{"x": 0}, {"x": 1}]
    assert all(rr.checks_done is None and rr.learner_values == {} for rr in result.ranks)


def test_code_that_ends_early_leaves_the_checks_unrun_and_says_where(engine: Engine) -> None:
    for ending, what in (("import sys\nsys.exit(0)", "SystemExit at line 13: sys.exit(0)"),
                         ("raise KeyError('boom')", "KeyError at line 12: 'boom'"),
                         ("import os\nos._exit(3)", "the learner process exited with status 3")):
        result = _exercise(engine, TOTAL + "\nreport('mine', 3)\n" + ending + "\n")
        assert result.checks_finished is False, ending
        assert "your code ended before the checks ran" in (result.checks_problem or ""), ending
        assert what in (result.checks_problem or ""), (ending, result.checks_problem)
        assert all(rr.values == {} and rr.learner_values == {"mine": 3} for rr in result.ranks)
        assert "did not finish" in result.diagnosis


def test_a_forbidden_collective_raises_where_learner_code_called_it_and_is_recorded(
    engine: Engine,
) -> None:
    result = _exercise(engine, TOTAL, forbid=("all_reduce",))
    assert result.checks_finished is False
    assert "ForbiddenCollective at line 8" in (result.checks_problem or "")
    for rr in result.ranks:
        assert rr.error is not None and rr.error.type.endswith("ForbiddenCollective")
        assert rr.error.message == ("all_reduce is not allowed in this exercise: write it "
                                    "with send/recv")
        (start,) = [e for e in events(result, rr.rank, "collective_start") if e["op"] == "all_reduce"]
        (end,) = [e for e in events(result, rr.rank, "collective_end") if e["seq"] == start["seq"]]
        assert "ForbiddenCollective" in end["error"] and start["line"] == 8
        assert start["source"] == "learner"


def test_the_learner_process_is_confined(engine: Engine) -> None:
    code = """
    import ctypes, errno, os, socket, threading

    def attempt(what, fn):
        try:
            fn()
            report(what, "allowed")
        except OSError as exc:
            report(what, errno.errorcode.get(exc.errno, str(exc.errno)))

    attempt("socket", lambda: socket.socket())
    attempt("unix socket", lambda: socket.socket(socket.AF_UNIX))
    attempt("fork", os.fork)
    attempt("exec", lambda: os.execv("/bin/true", ["true"]))
    attempt("pipe", os.pipe)
    attempt("memfd", lambda: os.memfd_create("stash"))
    attempt("reference", lambda: open("/tmp/.reference").read())
    attempt("driver memory", lambda: open(f"/proc/{os.getppid()}/mem", "rb").read(1))
    attempt("driver fds", lambda: os.listdir(f"/proc/{os.getppid()}/fd"))
    attempt("signal driver", lambda: os.kill(os.getppid(), 0))
    libc = ctypes.CDLL(None, use_errno=True)
    report("dumpable again", "EPERM" if libc.prctl(4, 1, 0, 0, 0) and ctypes.get_errno() == errno.EPERM
           else "allowed")
    report("uid", os.getuid())
    report("threads", threading.Thread(target=lambda: None).start() is None)
    """
    result = _exercise(engine, code, "report('ran', True)\n", reference=None)
    assert result.outcome == "ok", result.diagnosis
    for rr in result.ranks:
        got = rr.learner_values
        for denied in ("socket", "unix socket", "fork", "exec", "pipe", "memfd", "dumpable again"):
            assert got[denied] == "EPERM", (denied, got)
        assert got["reference"] == "EACCES", got
        assert got["driver memory"] in ("EACCES", "EPERM"), got
        assert got["driver fds"] in ("EACCES", "EPERM"), got
        assert got["signal driver"] == "EPERM", got
        assert got["threads"] is True
        assert got["uid"] != 0 and rr.learner_confined is True


def test_memory_is_measured_from_outside_at_the_checks_marks(engine: Engine) -> None:
    code = """
    import torch

    def keep(n):
        return torch.ones(n)  # touched pages: resident
    """
    checks = """
    _kept = keep(4 * 2**20)  # 16 MiB
    mark_memory("kept")
    del _kept
    mark_memory("freed")
    """
    result = _exercise(engine, code, checks, reference=code)
    assert result.outcome == "ok", result.diagnosis
    for rr in result.ranks:
        marks = {m.name: m for m in rr.memory_marks}
        assert 16 * 2**20 <= marks["kept"].bytes < 18 * 2**20
        assert marks["freed"].bytes < 2 * 2**20
        assert [m.ops for m in rr.memory_marks] == [m.ops for m in rr.reference_marks] == [0, 0]
        assert rr.memory_peak_bytes is not None and rr.memory_peak_bytes >= 16 * 2**20


def test_a_process_that_writes_out_of_protocol_ends_the_run_with_a_clear_error(
    engine: Engine,
) -> None:
    garbage = """
    import os
    def total(x):
        for fd in range(3, 64):
            try:
                os.write(fd, b"not a frame at all")
            except OSError:
                pass
        return x
    """
    forged = """
    import gc, struct, os
    from app.verify.engine import wire
    def total(x):
        link = next(o for o in gc.get_objects() if type(o).__name__ == "Link")
        # A well-formed header that claims a payload it never sends, then the end of the pipe.
        os.write(link.wfd, wire.encode(wire.OP, {"id": 99, "op": "allreduce", "group": "0",
                                                 "in": [["float32", [1 << 30]]], "out": []},
                                       4 << 30))
        os.close(link.wfd)
        return x
    """
    for code, detail in ((garbage, "does not start with the protocol's mark"),
                         (forged, "")):
        result = _exercise(engine, code, timeout_s=8)
        assert result.tampered is not None, result.diagnosis
        assert "broke the protocol" in result.tampered and detail in result.tampered
        assert result.checks_finished is False
        assert result.outcome == "error" and result.limit != "timeout"
        assert all(rr.values == {} for rr in result.ranks)


def test_a_learner_process_that_never_answers_meets_the_time_limit(engine: Engine) -> None:
    code = """
    import time
    def total(x):
        time.sleep(60)
    """
    result = _exercise(engine, code, timeout_s=4)
    assert result.outcome == "timeout" and result.checks_finished is False
    assert "time limit" in (result.checks_problem or "")


def test_the_learner_is_not_given_the_reference_or_other_ranks_secrets(engine: Engine) -> None:
    code = """
    import gc, os

    def strings(o):
        if isinstance(o, dict):
            return [v for v in (*o.keys(), *o.values()) if isinstance(v, str)]
        return [v for v in o if isinstance(v, str)] if isinstance(o, (list, tuple)) else []

    marker = "REFERENCE" + "-MARKER"
    report("found", sum(s is not marker and marker in s
                        for o in gc.get_objects() for s in strings(o)))
    report("files", sorted(os.listdir(".")))
    report("tmp", sorted(os.listdir("/tmp")) if os.access("/tmp", os.R_OK) else "unreadable")
    report("snippet", "SECRET" + "-CHECKS" in open("snippet.py").read())
    """
    result = _exercise(engine, code, 'report("secret", "SECRET-CHECKS")\n',
                       reference="REFERENCE_MARKER = 'REFERENCE-MARKER'\n")
    assert result.outcome == "ok", result.diagnosis
    for rr in result.ranks:
        assert rr.learner_values["found"] == 0
        assert rr.learner_values["tmp"] == "unreadable"
        assert rr.learner_values["snippet"] is False
        assert CHECKS_MARK.strip() not in json.dumps(rr.learner_values)


def test_the_checks_mark_splits_at_the_last_occurrence() -> None:
    text = compose("x = 1" + CHECKS_MARK + "report('fake', 1)\n", "report('real', 1)\n",
                   forbid=["all_reduce"], reference="x = 2\n")
    learner, checks, options = split(text) or ("", "", {})
    assert learner.endswith("report('fake', 1)\n")
    assert checks == "report('real', 1)\n"
    assert options == {"forbid": ["all_reduce"], "reference": "x = 2\n"}
    assert learner_part(text) == learner
    assert split("report('x', 1)\n") is None


def test_a_learner_s_own_reports_are_trimmed_before_the_checks_values() -> None:
    from app.verify.results import cap_result

    data = {"diagnosis": "ok", "buckets": [], "ranks": [
        {"rank": 0, "events": [], "stdout": "", "stderr": "", "values": {"checked": [1.5] * 1000},
         "learner_values": {f"mine{i}": [0.5] * 50_000 for i in range(4)}}]}
    capped = cap_result(data, limit=100_000)
    assert len(json.dumps(capped)) <= 100_000
    assert capped["ranks"][0]["values"] == {"checked": [1.5] * 1000}
    assert str(capped["ranks"][0]["learner_values"]["mine0"]).startswith("(not stored:")
