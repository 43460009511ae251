"""Diagnosis of the seed's failure cases, from real runs: who failed first, who was blocked where."""

from __future__ import annotations

from tests.verify.helpers import Run

UNEVEN = """
import time
import torch, torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
torch.manual_seed(0)
m = nn.Linear(2, 1, bias=False)
ddp = DDP(m)
for _ in range(3 if rank == 0 else 2):
    loss = ddp(torch.full((1, 2), float(rank + 1))).sum()
    loss.backward()
if rank == 1 and params.get("linger"):
    time.sleep(30)
"""


def test_uneven_inputs_without_join_blame_the_missing_iteration(run: Run) -> None:
    result = run(UNEVEN)
    assert result.outcome == "error"
    r0, r1 = result.ranks
    assert r1.error is None and r1.exit_code == 0
    assert r0.error is not None and r0.error.line == 10  # loss.backward()
    assert r0.blocked_in is not None
    assert (r0.blocked_in.op, r0.blocked_in.iteration) == ("all_reduce", 3)
    assert r0.blocked_in.detail == "DDP gradient bucket 0"
    assert r1.blocked_in is None
    text = result.diagnosis
    assert text.startswith("Rank 0 failed at ")
    assert "all_reduce (DDP gradient bucket 0, iteration 3, line 10)" in text
    assert "Rank 1 had finished the snippet after 2 DDP iterations" in text
    assert "different numbers of DDP iterations (3 on rank 0, 2 on rank 1)" in text
    # The last bucket reduction on rank 0 began and never completed.
    last = [b for b in result.buckets if b.rank == 0][-1]
    assert last.iteration == 3 and last.error is not None


def test_uneven_inputs_with_a_lingering_rank_time_out_in_gloo_first(run: Run) -> None:
    result = run(UNEVEN, params={"linger": True}, timeout_s=4)
    assert (result.outcome, result.limit) == ("timeout", "timeout")
    r0, r1 = result.ranks
    assert r0.error is not None and "Timed out" in r0.error.message
    assert r0.blocked_in is not None and r0.blocked_in.iteration == 3
    assert r1.signal == "SIGKILL" and r1.stack is not None
    assert "until gloo gave up" in result.diagnosis
    assert "Rank 1 was sleeping in user code at line 12 (`time.sleep(30)`)" in result.diagnosis


LONE_BARRIER = """
import time
import torch.distributed as dist
if rank == 0:
    dist.barrier()
elif params.get("linger"):
    time.sleep(30)
"""


def test_lone_barrier_fails_when_the_other_rank_exits(run: Run) -> None:
    result = run(LONE_BARRIER)
    assert result.outcome == "error"
    r0, r1 = result.ranks
    assert r0.blocked_in is not None and (r0.blocked_in.op, r0.blocked_in.line) == ("barrier", 5)
    assert r1.exit_code == 0
    assert "Rank 0 failed at" in result.diagnosis
    assert "blocked in barrier (line 5)" in result.diagnosis
    assert "Rank 1 never called barrier" in result.diagnosis


def test_lone_barrier_hangs_until_the_deadline_when_the_other_rank_sleeps(run: Run) -> None:
    result = run(LONE_BARRIER, params={"linger": True}, timeout_s=2)
    assert (result.outcome, result.limit) == ("timeout", "timeout")
    assert result.ranks[0].blocked_in is not None
    assert result.ranks[0].blocked_in.op == "barrier"
    assert result.diagnosis.startswith("The run hit its 2 s time limit")
    assert "sleeping in user code at line 7" in result.diagnosis


def test_a_rank_that_raises_is_named_first_and_its_peer_blocked(run: Run) -> None:
    result = run("""
    import torch, torch.distributed as dist
    t = torch.ones(1)
    if rank == 1:
        raise ValueError("boom on rank 1")
    dist.all_reduce(t)
    """)
    assert result.outcome == "error"
    r0, r1 = result.ranks
    assert r1.error is not None
    assert (r1.error.type, r1.error.message, r1.error.line) == ("ValueError", "boom on rank 1", 5)
    assert "snippet.py" in r1.error.traceback and "harness" not in r1.error.traceback
    assert r0.blocked_in is not None and r0.blocked_in.op == "all_reduce"
    assert result.diagnosis.startswith("Rank 1 failed first: ValueError: boom on rank 1 (line 5)")
    assert "Rank 0 failed at" in result.diagnosis and "because rank 1 had exited" in result.diagnosis


def test_a_rank_killed_by_a_signal_is_reported_with_the_signal(run: Run) -> None:
    result = run("""
    import os, torch, torch.distributed as dist
    if rank == 1:
        os.abort()
    dist.all_reduce(torch.ones(1))
    """)
    assert result.outcome == "error"
    assert result.ranks[1].signal == "SIGABRT"
    assert result.ranks[1].exit_code == -6
    assert result.diagnosis.startswith("Rank 1 failed first: it died from SIGABRT")


def test_a_killed_rank_keeps_the_trace_it_streamed(run: Run) -> None:
    result = run("""
    import time, torch, torch.distributed as dist
    t = torch.ones(4)
    for _ in range(3):
        dist.all_reduce(t)
    report("sum", t)
    time.sleep(30)
    """, timeout_s=1.5)
    assert result.outcome == "timeout"
    for r in result.ranks:
        assert r.values == {"sum": [8.0, 8.0, 8.0, 8.0]}
        ops = [e["op"] for e in r.events if e["kind"] == "collective_end"]
        assert ops == ["all_reduce"] * 3
        assert r.events[-1]["kind"] == "exit" and r.events[-1]["killed_by"] == "timeout"
        assert r.stack is not None and 'File "snippet.py", line 7' in r.stack


def test_ranks_in_different_collectives_both_time_out_in_gloo(run: Run) -> None:
    result = run("""
    import torch, torch.distributed as dist
    if rank == 0:
        dist.all_reduce(torch.ones(3))
    else:
        dist.barrier()
    """, timeout_s=4)
    # The group's timeout (3.2 s) is shorter than the run's, so gloo raises first.
    assert (result.outcome, result.limit) == ("error", None)
    assert [r.blocked_in.op if r.blocked_in else None for r in result.ranks] == [
        "all_reduce", "barrier"]
    # Whichever times out first exits; the other may see that before its own timeout.
    messages = [r.error.message if r.error else "" for r in result.ranks]
    assert any("Timed out" in m for m in messages), messages
    assert "different collectives (all_reduce on rank 0, barrier on rank 1)" in result.diagnosis


def test_exit_status_decides_how_a_rank_ended(run: Run) -> None:
    result = run("""
    import os, sys
    if rank == 0:
        os._exit(0)
    sys.exit(3)
    """)
    assert result.outcome == "error"
    r0, r1 = result.ranks
    assert (r0.exit_code, r0.error) == (0, None)
    assert r1.exit_code == 3 and r1.error is not None and r1.error.type == "SystemExit"
    assert result.diagnosis.startswith("Rank 1 failed first: it exited with status 3 (line 5)")
    assert "Rank 0 had finished the snippet" in result.diagnosis


def test_a_bare_exit_status_comes_with_the_ranks_last_output(run: Run) -> None:
    result = run("""
    import os, sys
    if rank == 1:
        print("disk quota gone while writing the checkpoint", file=sys.stderr, flush=True)
        os._exit(5)
    """)
    assert result.outcome == "error"
    assert result.diagnosis.startswith(
        "Rank 1 failed first: it exited with status 5 at ")
    assert "; its last output: disk quota gone while writing the checkpoint." in result.diagnosis
