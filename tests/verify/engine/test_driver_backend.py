"""The learner process's torch.distributed (backend.DriverGroup, performed by driver.py) against
the same code on a plain gloo group: every operation gives the same values and puts the same
bytes on the wire, on 2 and 4 real gloo ranks.

Each snippet runs twice through the engine: as a question's snippet (the single-process path,
its collectives recorded by the probes) and as an exercise's learner code (its collectives
forwarded over the pipe and performed by the rank's driver). Only blocking calls are compared
byte for byte, each op on its own: their bytes are a property of gloo's algorithm and sizes.
"""

from __future__ import annotations

import textwrap

import pytest

from app.verify.engine import Engine, Limits, RunResult
from app.verify.engine.forbid import compose

EVERY_OP = """
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

n, me = world_size, rank
g = torch.Generator().manual_seed(1000 + me)

t = torch.randn(1000, generator=g)
dist.all_reduce(t)
report("all_reduce", t[:8])
m = torch.randn(64, generator=g)
dist.all_reduce(m, op=dist.ReduceOp.MAX)
report("all_reduce_max", m[:8])

b = torch.randn(300, generator=g)
dist.broadcast(b, src=n - 1)
report("broadcast", b[:8])

r = torch.randn(200, generator=g)
dist.reduce(r, dst=0)
if me == 0:
    report("reduce", r[:8])

outs = [torch.empty(50) for _ in range(n)]
dist.all_gather(outs, torch.randn(50, generator=g))
report("all_gather", torch.stack(outs)[:, :4])

whole = torch.empty(40 * n)
dist.all_gather_into_tensor(whole, torch.randn(40, generator=g))
report("all_gather_into_tensor", whole)

mine = torch.empty(30)
dist.reduce_scatter_tensor(mine, torch.randn(30 * n, generator=g))
report("reduce_scatter_tensor", mine)

got = torch.empty(8 * n)
dist.all_to_all_single(got, torch.randn(8 * n, generator=g))
report("all_to_all_single", got)

send_rows = [((me + j) % 3) + 1 for j in range(n)]
recv_rows = [((j + me) % 3) + 1 for j in range(n)]
x = torch.randn(sum(send_rows), 4, generator=g)
y = torch.empty(sum(recv_rows), 4)
dist.all_to_all_single(y, x, output_split_sizes=recv_rows, input_split_sizes=send_rows)
report("all_to_all_single_uneven", y)

gathered = [torch.empty(6) for _ in range(n)] if me == 0 else None
dist.gather(torch.randn(6, generator=g), gather_list=gathered, dst=0)
if me == 0:
    report("gather", torch.stack(gathered))

piece = torch.empty(5)
dist.scatter(piece, [torch.randn(5, generator=g) for _ in range(n)] if me == 0 else None, src=0)
report("scatter", piece)

dist.barrier()

ring = torch.full((100,), float(me))
into = torch.empty(100)
if me % 2 == 0:
    dist.send(ring, dst=(me + 1) % n)
    dist.recv(into, src=(me - 1) % n)
else:
    dist.recv(into, src=(me - 1) % n)
    dist.send(ring, dst=(me + 1) % n)
report("send_recv", into[:4])

low = dist.new_group([0, 1])
if me in (0, 1):
    s = torch.full((16,), float(me + 1))
    dist.all_reduce(s, group=low)
    report("subgroup_all_reduce", s[:4])
    q = torch.full((8,), float(me))
    dist.broadcast(q, group=low, group_src=1)
    report("subgroup_broadcast", q[:4])

f = funcol.all_reduce(torch.ones(16) * (me + 1), "sum", dist.group.WORLD)
report("functional_all_reduce", funcol.wait_tensor(f)[:4])

objs = [None] * n
dist.all_gather_object(objs, {"rank": me})
report("all_gather_object", [o["rank"] for o in objs])

a = torch.full((10,), float(me))
c = torch.empty(10)
reqs = [dist.isend(a, (me + 1) % n), dist.irecv(c, (me - 1) % n)]
for req in reqs:
    req.wait()
report("isend_irecv", c[:2])
p2p = dist.batch_isend_irecv([dist.P2POp(dist.isend, a, (me + 1) % n),
                              dist.P2POp(dist.irecv, c, (me - 1) % n)])
for req in p2p:
    req.wait()
report("batch_isend_irecv", c[:2])
"""

MODELS = """
import torch
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

torch.manual_seed(0)
mesh = init_device_mesh("cpu", (world_size,))
tp = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8))
parallelize_module(tp, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
x = torch.arange(24.0).reshape(3, 8) / 10
y = tp(x)
report("tp_out", y.detach())
y.sum().backward()
report("tp_grad", tp[0].weight.grad.to_local())

torch.manual_seed(1)
net = nn.Sequential(nn.Linear(8, 16), nn.Linear(16, 8))
fully_shard(net[0])
fully_shard(net[1])
fully_shard(net)
out = net(torch.ones(2, 8) * (rank + 1))
out.sum().backward()
report("fsdp_out", out.detach())
report("fsdp_grad", net[0].weight.grad.to_local())
"""


def _both(engine: Engine, code: str, world_size: int) -> tuple[RunResult, RunResult]:
    code = textwrap.dedent(code)
    plain = engine.run(code, world_size=world_size, limits=Limits(timeout_s=60))
    through_driver = engine.run(compose(code, "", reference=None), world_size=world_size,
                                limits=Limits(timeout_s=60))
    return plain, through_driver


def _ops(result: RunResult, rank: int) -> list[tuple[str, int]]:
    """(op, bytes this rank put on the wire) of each collective, in the order they ended."""
    ends = [e for e in result.ranks[rank].events if e["kind"] == "collective_end"]
    return [(str(e["op"]), int(e["bytes_sent"])) for e in ends if e["op"] != "new_group"]


@pytest.mark.parametrize("world_size", [2, 4])
def test_every_operation_gives_the_values_and_bytes_of_a_plain_gloo_group(
    engine: Engine, world_size: int,
) -> None:
    plain, driven = _both(engine, EVERY_OP, world_size)
    assert plain.outcome == "ok", plain.diagnosis
    assert driven.outcome == "ok" and driven.learner_confined is True, driven.diagnosis
    for p, d in zip(plain.ranks, driven.ranks, strict=True):
        assert d.learner_values == p.values
        assert len(p.values) >= 14
    for rank in range(world_size):
        # Up to the functional all-reduce every call is blocking: compare op by op. (After it,
        # all_gather_object is one call to the probes and two all-gathers to the driver, and
        # the asynchronous point-to-point calls end in either order.)
        plain_ops = _ops(plain, rank)
        cut = max(i for i, (name, _) in enumerate(plain_ops) if name == "all_reduce") + 1
        assert plain_ops[:cut] == _ops(driven, rank)[:cut], rank
        assert len(plain_ops[:cut]) >= 15


@pytest.mark.parametrize("world_size", [2, 4])
def test_dtensor_tensor_parallel_and_fully_shard_run_forward_and_backward_unchanged(
    engine: Engine, world_size: int,
) -> None:
    plain, driven = _both(engine, MODELS, world_size)
    assert plain.outcome == "ok", plain.diagnosis
    assert driven.outcome == "ok", driven.diagnosis
    for p, d in zip(plain.ranks, driven.ranks, strict=True):
        assert d.learner_values == p.values
    names = {op for r in range(world_size) for op, _ in _ops(driven, r)}
    assert {"scatter", "broadcast", "all_reduce", "all_gather_into_tensor",
            "reduce_scatter_tensor"} <= names
    for rank in range(world_size):
        # FSDP overlaps a reduce-scatter with the next all-gather it prefetches: bytes sent
        # while two ran count in each (docs/run-result.md), and how many depends on timing. So
        # what is exact is compared: every op's count, the bytes of the ops that ran alone in
        # both runs, and the rank's bytes from its first operation's start to its last's end.
        plain_ops, driven_ops = _timed_ops(plain, rank), _timed_ops(driven, rank)
        assert sorted(o[0] for o in driven_ops) == sorted(o[0] for o in plain_ops), rank
        assert _span(driven_ops) == _span(plain_ops), rank
        alone = {o[1] for o in plain_ops if o[4]} & {o[1] for o in driven_ops if o[4]}
        assert len(alone) >= 5, rank
        assert ({o[1]: o[:3] for o in driven_ops if o[1] in alone}
                == {o[1]: o[:3] for o in plain_ops if o[1] in alone}), rank


def _timed_ops(result: RunResult, rank: int) -> list[tuple[str, int, int, int, bool]]:
    """(op, its place among the rank's operations in the order they started, bytes sent, sent
    total at its end, whether it ran alone: no other operation was under way when it started
    and none started or ended before it ended) of each collective, in the order they ended.
    (The place, not `seq`: a question's probes number `new_group` too, the driver does not.)"""
    events = [e for e in result.ranks[rank].events
              if e["kind"] in ("collective_start", "collective_end") and e["op"] != "new_group"]
    place: dict[int, int] = {}
    under_way: set[int] = set()
    alone_so_far: dict[int, bool] = {}
    out = []
    for i, e in enumerate(events):
        seq = int(e["seq"])
        if e["kind"] == "collective_start":
            place[seq] = len(place)
            alone_so_far[seq] = not under_way
            under_way.add(seq)
            continue
        under_way.discard(seq)
        previous = events[i - 1]
        alone = (alone_so_far[seq] and previous["kind"] == "collective_start"
                 and int(previous["seq"]) == seq)
        out.append((str(e["op"]), place[seq], int(e["bytes_sent"]), int(e["sent_total"]), alone))
    return out


def _span(ops: list[tuple[str, int, int, int, bool]]) -> int:
    """The bytes the rank sent from its first operation's start to its last operation's end."""
    return max(o[3] for o in ops) - min(o[3] - o[2] for o in ops)

