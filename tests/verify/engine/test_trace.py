"""What the probes capture, and that capturing it changes nothing torch computes."""

from __future__ import annotations

import pytest

from tests.verify.helpers import Run, events


def test_collectives_are_paired_and_count_bytes_on_gloo_sockets(run: Run) -> None:
    result = run("""
    import torch, torch.distributed as dist
    t = torch.ones(256 * 1024)  # 1 MiB of float32
    dist.all_reduce(t)
    dist.broadcast(t, src=0)
    dist.barrier()
    report("first", t[0])
    """)
    assert result.outcome == "ok", result.diagnosis
    for rank in range(2):
        starts = events(result, rank, "collective_start")
        ends = events(result, rank, "collective_end")
        assert [e["op"] for e in starts] == ["all_reduce", "broadcast", "barrier"]
        assert [e["seq"] for e in starts] == [e["seq"] for e in ends]
        reduce = starts[0]
        assert reduce["shape"] == [262144] and reduce["bytes"] == 2**20
        assert (reduce["group_size"], reduce["reduce_op"], reduce["line"]) == (2, "SUM", 4)
        assert reduce["source"] == "snippet"
        assert all(s["t_ms"] <= e["t_ms"] for s, e in zip(starts, ends, strict=True))
        # An all-reduce between two ranks sends about the whole tensor once.
        assert 0.9 * 2**20 <= ends[0]["bytes_sent"] <= 1.5 * 2**20
        assert result.ranks[rank].bytes_sent >= ends[0]["bytes_sent"]
        assert result.ranks[rank].values == {"first": 2.0}


def test_ddp_iterations_grad_ready_and_bucket_times_are_ordered(run: Run) -> None:
    result = run("""
    import torch, torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 8))
    ddp = DDP(model, bucket_cap_mb=0.5)
    for _ in range(3):
        ddp(torch.randn(4, 512)).sum().backward()
    report("rebuilt", ddp._get_ddp_logging_data()["rebuilt_bucket_sizes"])
    """)
    assert result.outcome == "ok", result.diagnosis
    names = {"0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"}
    for rank in range(2):
        assert [e["iteration"] for e in events(result, rank, "ddp_forward_start")] == [1, 2, 3]
        assert [e["iteration"] for e in events(result, rank, "ddp_backward_end")] == [1, 2, 3]
        ready = events(result, rank, "grad_ready")
        assert {e["param"] for e in ready} == names and len(ready) == 18
    buckets = [b for b in result.buckets if b.rank == 0]
    # The first iteration is one bucket holding everything; DDP then rebuilds them in
    # reverse parameter order, and the records agree with DDP's own logging data.
    first = [b for b in buckets if b.iteration == 1]
    assert len(first) == 1 and set(first[0].params) == names
    second = [b for b in buckets if b.iteration == 2]
    assert [b.index for b in second] == [0, 1]
    assert ", ".join(str(b.bytes) for b in second) == result.ranks[0].values["rebuilt"]
    assert second[0].params[0] == "4.bias"
    backward_end = {e["iteration"]: e["t_ms"] for e in events(result, 0, "ddp_backward_end")}
    for b in buckets:
        assert b.first_ready_ms is not None and b.last_ready_ms is not None
        assert b.reduce_end_ms is not None
        assert b.first_ready_ms <= b.last_ready_ms <= b.reduce_start_ms <= b.reduce_end_ms
        assert b.reduce_end_ms <= backward_end[b.iteration]


PROBED_DDP = """
import torch, torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
torch.manual_seed(0)
model = nn.Linear(7, 5)
ddp = DDP(model, gradient_as_bucket_view=params["view"])
opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
g = torch.Generator().manual_seed(rank)
grads = []
for step in range(3):
    opt.zero_grad(set_to_none=step == 1)
    ddp(torch.randn(3, 7, generator=g)).pow(2).sum().backward()
    grads.append([p.grad.clone() for p in model.parameters()])
    opt.step()
report("grads", grads)
"""


@pytest.mark.parametrize("view", [False, True], ids=["copy", "bucket-view"])
def test_bucket_probe_gives_bit_identical_gradients_to_builtin_reducer(run: Run, view: bool) -> None:
    # Three ranks: dividing by 3 is where multiply-by-reciprocal and divide differ.
    probed = run(PROBED_DDP, world_size=3, params={"view": view})
    plain = run(PROBED_DDP, world_size=3, params={"view": view}, trace_buckets=False)
    assert probed.outcome == plain.outcome == "ok"
    assert plain.buckets == [] and len(probed.buckets) == 9
    assert [r.values for r in probed.ranks] == [r.values for r in plain.ranks]


def test_world_size_four_averages_over_four_ranks(run: Run) -> None:
    result = run("""
    import torch, torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    m = nn.Linear(2, 1, bias=False)
    ddp = DDP(m)
    ddp(torch.full((1, 2), float(rank + 1))).sum().backward()
    report("grad", m.weight.grad)
    report("world", world_size)
    """, world_size=4)
    assert result.outcome == "ok", result.diagnosis
    assert [r.values for r in result.ranks] == [{"grad": [[2.5, 2.5]], "world": 4}] * 4
    assert sorted(b.rank for b in result.buckets) == [0, 1, 2, 3]
    assert {e["group_size"] for r in range(4) for e in events(result, r, "bucket_reduce_start")} == {4}


def test_world_size_one_runs(run: Run) -> None:
    result = run("import torch.distributed as dist\nreport('ws', dist.get_world_size())",
                 world_size=1)
    assert result.outcome == "ok" and result.ranks[0].values == {"ws": 1}


def test_reported_values_become_json(run: Run) -> None:
    result = run("""
    import torch
    report("tensor", torch.arange(4).reshape(2, 2))
    report("scalar", torch.tensor(2.5))
    report("half", torch.ones(2, dtype=torch.float16))
    report("odd", [float("nan"), float("inf"), -float("inf")])
    report("mixed", {"a": (1, "x"), "size": torch.Size([2, 3]), "dtype": torch.float32})
    report("params", params)
    """, world_size=1, params={"k": [3, 2]})
    assert result.outcome == "ok", result.diagnosis
    assert result.ranks[0].values == {
        "tensor": [[0, 1], [2, 3]], "scalar": 2.5, "half": [1.0, 1.0],
        "odd": ["NaN", "Infinity", "-Infinity"],
        "mixed": {"a": [1, "x"], "size": [2, 3], "dtype": "torch.float32"},
        "params": {"k": [3, 2]},
    }


def test_reporting_an_unsupported_value_is_the_snippets_error(run: Run) -> None:
    result = run("report('thing', object())", world_size=1)
    assert result.outcome == "error"
    assert result.ranks[0].error is not None and result.ranks[0].error.type == "TypeError"


def test_registering_a_second_comm_hook_fails_as_in_torch(run: Run) -> None:
    result = run("""
    import torch, torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    ddp = DDP(nn.Linear(2, 1))
    ddp.register_comm_hook(None, default_hooks.allreduce_hook)
    try:
        ddp.register_comm_hook(None, default_hooks.allreduce_hook)
    except RuntimeError as exc:
        report("error", str(exc))
    """)
    assert result.outcome == "ok", result.diagnosis
    assert "can only be called once" in result.ranks[0].values["error"]


def test_backward_through_the_bare_module_is_not_counted_as_ddp(run: Run) -> None:
    result = run("""
    import torch, torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    m = nn.Linear(2, 1, bias=False)
    ddp = DDP(m)
    m(torch.ones(1, 2)).sum().backward()      # local, no DDP involved
    m.weight.grad = None
    ddp(torch.ones(1, 2)).sum().backward()
    """)
    assert result.outcome == "ok", result.diagnosis
    assert [e["iteration"] for e in events(result, 0, "grad_ready")] == [1]
    assert [e["iteration"] for e in events(result, 0, "ddp_backward_end")] == [1]


def test_subgroup_collectives_record_the_subgroup_size(run: Run) -> None:
    result = run("""
    import torch, torch.distributed as dist
    pairs = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    t = torch.full((1024,), float(rank))
    dist.all_reduce(t, group=pairs[rank // 2])
    report("t0", t[0])
    """, world_size=4)
    assert result.outcome == "ok", result.diagnosis
    assert [r.values["t0"] for r in result.ranks] == [1.0, 1.0, 5.0, 5.0]
    for rank in range(4):
        reduce = [e for e in events(result, rank, "collective_start") if e["op"] == "all_reduce"]
        assert [e["group_size"] for e in reduce] == [2]
        end = [e for e in events(result, rank, "collective_end") if e["seq"] == reduce[0]["seq"]]
        assert end[0]["bytes_sent"] >= 4096
