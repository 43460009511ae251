"""The seed's measured claims, re-measured on real gloo ranks."""

from __future__ import annotations

from tests.verify.helpers import Run

LINEAR = """
import torch, torch.nn as nn, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
torch.manual_seed(0)
m = nn.Linear(2, 1, bias=False)
ddp = DDP(m)
"""


def test_ddp_averages_gradients_across_two_ranks(run: Run) -> None:
    result = run(LINEAR + """
ddp(torch.full((1, 2), float(rank + 1))).sum().backward()
report("grad", m.weight.grad)
""")
    assert result.outcome == "ok", result.diagnosis
    assert [r.values["grad"] for r in result.ranks] == [[[1.5, 1.5]], [[1.5, 1.5]]]
    assert [(b.rank, b.iteration, b.index, b.params) for b in result.buckets] == [
        (0, 1, 0, ["weight"]), (1, 1, 0, ["weight"])]


def test_sum_comm_hook_without_division_leaves_the_raw_sum(run: Run) -> None:
    result = run(LINEAR + """
def sum_hook(state, bucket):
    fut = dist.all_reduce(bucket.buffer(), op=dist.ReduceOp.SUM, async_op=True).get_future()
    return fut.then(lambda f: f.value()[0])
ddp.register_comm_hook(None, sum_hook)
ddp(torch.full((1, 2), float(rank + 1))).sum().backward()
report("grad", m.weight.grad)
""")
    assert result.outcome == "ok", result.diagnosis
    assert [r.values["grad"] for r in result.ranks] == [[[3.0, 3.0]], [[3.0, 3.0]]]
    # The author's hook ran inside the probe, which still timed the bucket.
    assert {b.hook for b in result.buckets} == {"sum_hook"}
    assert all(b.reduce_end_ms is not None and b.reduce_end_ms >= b.reduce_start_ms
               for b in result.buckets)


def test_uneven_local_batches_give_the_flat_average_of_rank_means(run: Run) -> None:
    result = run(LINEAR + """
x = torch.tensor([[1.0, 1.0]]) if rank == 0 else torch.tensor([[2.0, 2.0], [3.0, 3.0], [4.0, 4.0]])
ddp(x).mean().backward()
report("grad", m.weight.grad)
""")
    assert result.outcome == "ok", result.diagnosis
    # Rank means are 1 and 3: DDP gives 2, not the pooled mean over 4 samples (2.5).
    assert [r.values["grad"] for r in result.ranks] == [[[2.0, 2.0]], [[2.0, 2.0]]]


JOIN = LINEAR + """
batches = 3 if rank == 0 else 2
grads = []
with ddp.join(divide_by_initial_world_size=params["divide"]):
    for _ in range(batches):
        m.weight.grad = None
        ddp(torch.full((1, 2), float(rank + 1))).sum().backward()
        grads.append(m.weight.grad)
report("grads", grads)
"""


def test_join_divides_the_extra_step_by_the_initial_world_size_by_default(run: Run) -> None:
    result = run(JOIN, params={"divide": True})
    assert result.outcome == "ok", result.diagnosis
    assert result.ranks[0].values["grads"] == [[[1.5, 1.5]], [[1.5, 1.5]], [[0.5, 0.5]]]
    assert result.ranks[1].values["grads"] == [[[1.5, 1.5]], [[1.5, 1.5]]]
    shadows = [(b.rank, b.iteration) for b in result.buckets if b.shadow]
    assert shadows == [(1, 3)]
    assert "rank 1 ran out of inputs after iteration 2" in result.diagnosis


def test_join_divides_by_the_live_ranks_when_not_by_initial_world_size(run: Run) -> None:
    result = run(JOIN, params={"divide": False})
    assert result.outcome == "ok", result.diagnosis
    assert result.ranks[0].values["grads"][-1] == [[1.0, 1.0]]


def test_throw_on_early_termination_raises_on_both_ranks(run: Run) -> None:
    result = run(LINEAR + """
with ddp.join(throw_on_early_termination=True):
    for _ in range(3 if rank == 0 else 2):
        ddp(torch.full((1, 2), float(rank + 1))).sum().backward()
""")
    assert result.outcome == "error"
    r0, r1 = result.ranks
    assert r1.error is not None and "Rank 1 exhausted all inputs" in r1.error.message
    assert r0.error is not None and "Detected at least one rank that exhausted inputs" in r0.error.message
    assert result.diagnosis.startswith("Rank 1 ran out of inputs after iteration 2")
    assert "throw_on_early_termination" in result.diagnosis


NO_SYNC = LINEAR + """
xs = [torch.full((1, 2), float(rank + 1 + k)) for k in range(4)]
if params["no_sync"]:
    with ddp.no_sync():
        for x in xs[:3]:
            ddp(x).sum().backward()
    ddp(xs[3]).sum().backward()
else:
    for x in xs:
        ddp(x).sum().backward()
report("grad", m.weight.grad)
"""


def test_no_sync_over_three_of_four_micro_batches_reduces_once_with_the_same_grads(run: Run) -> None:
    synced = run(NO_SYNC, params={"no_sync": False})
    accumulated = run(NO_SYNC, params={"no_sync": True})
    assert synced.outcome == accumulated.outcome == "ok"
    assert [b.rank for b in synced.buckets].count(0) == 4
    assert [(b.rank, b.iteration) for b in accumulated.buckets] == [(0, 4), (1, 4)]
    assert [r.values for r in synced.ranks] == [r.values for r in accumulated.ranks]
