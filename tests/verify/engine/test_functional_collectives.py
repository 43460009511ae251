"""Collectives that bypass torch.distributed's Python functions are recorded like any dist.* call.

Tensor parallelism and DTensor issue functional collectives, FSDP2 calls the
`*_single` functions with async work, and code can call c10d ops itself; every
one of them is one `collective_start`/`collective_end` pair under the
torch.distributed name of the operation, on real gloo ranks.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.verify.engine.result import RunResult
from tests.verify.helpers import Run, events

TP = """
import torch, torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import parallelize_module, ColwiseParallel, RowwiseParallel
torch.manual_seed(0)
mesh = init_device_mesh("cpu", (world_size,))
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8))
model = parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
report("@forward", 1)
for step in range(3):
    out = model(torch.ones(2, 8))
    report(f"out{step}", out.sum())
"""

FSDP = """
import torch, torch.nn as nn
from torch.distributed.fsdp import fully_shard
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8))
for unit in (model[0], model[2], model):
    fully_shard(unit, reshard_after_forward=params["reshard"])
report("@forward", 1)
loss = model(torch.ones(2, 8)).sum()
report("@backward", 1)
loss.backward()
report("@done", 1)
"""


def _phases(result: RunResult, rank: int) -> dict[str, list[dict[str, Any]]]:
    """The rank's collective starts, grouped by the last `@phase` marker reported before them."""
    phase = "setup"
    out: dict[str, list[dict[str, Any]]] = {phase: []}
    for e in result.ranks[rank].events:
        if e["kind"] == "report" and e["name"].startswith("@"):
            phase = e["name"][1:]
            out[phase] = []
        elif e["kind"] == "collective_start":
            out[phase].append(e)
    return out


def _paired(result: RunResult, rank: int) -> None:
    starts = {e["seq"]: e for e in events(result, rank, "collective_start")}
    ends = {e["seq"]: e for e in events(result, rank, "collective_end")}
    assert starts.keys() == ends.keys()
    for seq, end in ends.items():
        assert end["op"] == starts[seq]["op"] and end["t_ms"] >= starts[seq]["t_ms"]
        assert end.get("error") is None


@pytest.mark.parametrize("world_size", [2, 4])
def test_colwise_then_rowwise_is_one_all_reduce_per_forward_on_each_rank(run: Run, world_size: int) -> None:
    result = run(TP, world_size=world_size, timeout_s=60)
    assert result.outcome == "ok", result.diagnosis
    for rank in range(world_size):
        phases = _phases(result, rank)
        forward = phases["forward"]
        assert [e["op"] for e in forward] == ["all_reduce"] * 3, forward
        for e in forward:
            # Rowwise's partial sums, reduced by DTensor's redistribute, on the snippet's line.
            assert (e["source"], e["caller"], e["api"], e["line"]) == (
                "torch", "redistribute_local_tensor", "c10d.allreduce_", 11)
            assert (e["shape"], e["bytes"], e["group_size"]) == ([2, 8], 64, world_size)
        # parallelize_module shards the weights from rank 0: scatters, and a broadcast of
        # Rowwise's replicated bias.
        assert sorted(e["op"] for e in phases["setup"]) == ["broadcast", "scatter", "scatter", "scatter"]
        _paired(result, rank)
        ends = {e["seq"]: e for e in events(result, rank, "collective_end")}
        assert all(ends[e["seq"]]["bytes_sent"] > 0 for e in forward)
        assert result.ranks[rank].bytes_sent >= sum(ends[e["seq"]]["bytes_sent"] for e in forward)
    assert len({str(r.values["out0"]) for r in result.ranks}) == 1


def test_fully_shard_gathers_each_unit_in_forward_and_again_in_backward(run: Run) -> None:
    result = run(FSDP, params={"reshard": True}, timeout_s=60)
    assert result.outcome == "ok", result.diagnosis
    for rank in range(2):
        phases = _phases(result, rank)
        assert phases["setup"] == []
        # One all-gather per unit with parameters (the root holds none of its own).
        assert [(e["op"], e["unit"]) for e in phases["forward"]] == [
            ("all_gather_into_tensor", "0"), ("all_gather_into_tensor", "2")]
        # Resharded after forward, so backward gathers again, last unit first (unit 0's
        # gather is FSDP's prefetch, issued before unit 2's gradients are reduce-scattered).
        assert [(e["op"], e["unit"]) for e in phases["backward"]] == [
            ("all_gather_into_tensor", "2"), ("all_gather_into_tensor", "0"),
            ("reduce_scatter_tensor", "2"), ("reduce_scatter_tensor", "0")]
        for e in phases["forward"] + phases["backward"]:
            assert e["source"] == "torch" and e["caller"] in ("foreach_all_gather", "foreach_reduce")
            assert e["api"] in ("all_gather_single", "reduce_scatter_single")
        # Unit 0 is Linear(8, 16): 144 parameters, half on each rank; gradients are the full 144.
        gathers = [e for e in phases["forward"] if e["unit"] == "0"]
        assert gathers[0]["bytes"] == 72 * 4
        assert [e["bytes"] for e in phases["backward"] if e["unit"] == "0"] == [72 * 4, 144 * 4]
        _paired(result, rank)


def test_fully_shard_without_reshard_after_forward_gathers_nothing_in_backward(run: Run) -> None:
    result = run(FSDP, params={"reshard": False}, timeout_s=60)
    assert result.outcome == "ok", result.diagnosis
    for rank in range(2):
        phases = _phases(result, rank)
        assert [e["op"] for e in phases["forward"]] == ["all_gather_into_tensor"] * 2
        assert [(e["op"], e["unit"]) for e in phases["backward"]] == [
            ("reduce_scatter_tensor", "2"), ("reduce_scatter_tensor", "0")]


HSDP = """
import torch, torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("replicate", "shard"))
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8))
for unit in (model[0], model[2], model):
    fully_shard(unit, mesh=mesh)
report("@forward", 1)
loss = model(torch.ones(2, 8)).sum()
report("@backward", 1)
loss.backward()
report("@done", 1)
"""


def test_hybrid_sharding_reduce_scatters_within_a_shard_group_and_all_reduces_across_replicas(
        run: Run) -> None:
    result = run(HSDP, world_size=4, timeout_s=90)
    assert result.outcome == "ok", result.diagnosis
    for rank in range(4):
        shard = [rank - rank % 2, rank - rank % 2 + 1]      # mesh rows: (0, 1) and (2, 3)
        replicas = [rank % 2, rank % 2 + 2]                 # mesh columns: (0, 2) and (1, 3)
        phases = _phases(result, rank)
        gathers = [e for e in phases["forward"] + phases["backward"] if e["op"] == "all_gather_into_tensor"]
        assert len(gathers) == 4 and all(e["group_ranks"] == shard for e in gathers)
        backward = [(e["op"], e["unit"], e["group_ranks"]) for e in phases["backward"]
                    if e["op"] != "all_gather_into_tensor"]
        assert backward == [("reduce_scatter_tensor", "2", shard), ("all_reduce", "2", replicas),
                            ("reduce_scatter_tensor", "0", shard), ("all_reduce", "0", replicas)]
        _paired(result, rank)
        assert result.ranks[rank].bytes_sent > 0


def test_a_rank_hung_in_a_functional_collective_is_blocked_in_it(run: Run) -> None:
    result = run("""
    import time, torch, torch.nn as nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import parallelize_module, ColwiseParallel, RowwiseParallel
    mesh = init_device_mesh("cpu", (world_size,))
    model = parallelize_module(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8)), mesh,
                               {"0": ColwiseParallel(), "2": RowwiseParallel()})
    if rank == 0:
        out = model(torch.ones(2, 8))
        report("sum", out.sum())
    else:
        time.sleep(60)
    """, timeout_s=8)
    assert result.outcome == "timeout"
    blocked = result.ranks[0].blocked_in
    assert blocked is not None and blocked.op == "all_reduce" and blocked.line == 9
    assert blocked.detail == "issued by torch's redistribute_local_tensor"
    assert "Rank 0 was blocked in all_reduce" in result.diagnosis
    assert "Rank 1 never called all_reduce" in result.diagnosis


def test_functional_and_single_calls_from_the_snippet_are_one_event_each(run: Run) -> None:
    result = run("""
    import torch, torch.distributed as dist
    import torch.distributed._functional_collectives as funcol
    t = funcol.all_reduce(torch.ones(4), "sum", dist.group.WORLD)
    report("funcol", t.wait() if hasattr(t, "wait") else t)
    out = torch.empty(8)
    dist.all_gather_single(out, torch.full((4,), float(rank)))
    rs = torch.empty(2)
    dist.reduce_scatter_single(rs, torch.ones(4))
    report("gathered", out)
    report("scattered", rs)
    """)
    assert result.outcome == "ok", result.diagnosis
    for rank in range(2):
        rows = [(e["op"], e.get("api"), e["source"], e["line"])
                for e in events(result, rank, "collective_start")]
        # A functional collective called by the snippet is the snippet's; a *_single call is
        # recorded once, under the older name, not again where it reaches c10d.
        assert rows == [
            ("all_reduce", "c10d.allreduce_", "snippet", 4),
            ("all_gather_into_tensor", "all_gather_single", "snippet", 7),
            ("reduce_scatter_tensor", "reduce_scatter_single", "snippet", 9),
        ]
        _paired(result, rank)
        values = result.ranks[rank].values
        assert values["funcol"] == [2.0] * 4 and values["scattered"] == [2.0, 2.0]
        assert values["gathered"] == [0.0] * 4 + [1.0] * 4


DDP_RUNS = {
    # Two buckets from iteration 2 on: DDP broadcasts the rebuilt bucket sizes from C++.
    "buckets": ("""
import torch, torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
ddp = DDP(nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                        nn.Linear(512, 8)), bucket_cap_mb=0.5)
for _ in range(3):
    ddp(torch.randn(4, 512)).sum().backward()
""", 1 + 2 + 2),
    # The used-parameter map is all-reduced by the reducer during every backward.
    "unused": ("""
import torch, torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
class Two(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)
    def forward(self, x):
        return self.a(x)
ddp = DDP(Two(), find_unused_parameters=True)
for _ in range(3):
    ddp(torch.randn(2, 4)).sum().backward()
""", 3),
}


@pytest.mark.parametrize("trace_buckets", [True, False], ids=["probed", "built-in"])
@pytest.mark.parametrize("name", sorted(DDP_RUNS))
def test_ddp_runs_gain_no_events_from_the_dispatcher_probe(run: Run, name: str, trace_buckets: bool) -> None:
    code, buckets = DDP_RUNS[name]
    result = run(code, trace_buckets=trace_buckets)
    assert result.outcome == "ok", result.diagnosis
    for rank in range(2):
        # DDP's reducer talks for itself (gradients, bucket sizes, the used-parameter map):
        # as before, only DDP's Python-level calls are collectives, and buckets are buckets.
        ops = [e["op"] for e in events(result, rank, "collective_start")]
        assert ops == ["_verify_params_across_processes", "_broadcast_coalesced"]
        assert len(events(result, rank, "bucket_reduce_start")) == (buckets if trace_buckets else 0)
        _paired(result, rank)


def test_odd_but_honest_calls_are_recorded_not_mistaken_for_forgeries(run: Run) -> None:
    # A rank outside the group (torch says its size is -1) and a boolean peer are what a
    # snippet may do; the harness's events about them must pass the engine's event check.
    result = run("""
    import warnings, torch, torch.distributed as dist
    warnings.simplefilter("ignore")
    only_zero = dist.new_group([0])
    t = torch.ones(2)
    dist.all_reduce(t, group=only_zero)
    try:
        dist.broadcast(t, src=True)
    except Exception:
        pass
    report("t", t)
    """)
    assert all(r.error is None for r in result.ranks), result.diagnosis
    starts = [(e["op"], e["group_size"]) for e in events(result, 1, "collective_start")]
    assert ("all_reduce", None) in starts and "peer" not in events(result, 1, "collective_start")[-1]
