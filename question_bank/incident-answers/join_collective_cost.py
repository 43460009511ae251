# What ddp.join() adds to the collective schedule. Every Python-level all_reduce and
# model broadcast is counted (gradient-bucket reductions run in C++ and are not).
# mode "even": both ranks have params["batches"] batches; "uneven": rank 1 has
# params["rank1_batches"], so it joins early.
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

counts = {"all_reduce": 0, "_broadcast_coalesced": 0}


def counting(name):
    original = getattr(dist, name)

    def wrapper(*args, **kwargs):
        counts[name] += 1
        return original(*args, **kwargs)

    setattr(dist, name, wrapper)


counting("all_reduce")
counting("_broadcast_coalesced")

torch.manual_seed(0)
model = nn.Linear(2, 1, bias=False)
ddp = DDP(model)
batches = params["rank1_batches"] if (params["mode"] == "uneven" and rank == 1) else params["batches"]
with ddp.join():
    for i in range(batches):
        ddp(torch.full((1, 2), float(i + 1))).sum().backward()
    report("all_reduces_per_forward", counts["all_reduce"] / batches)
    before_exit = dict(counts)
# Leaving the context: shadowing for ranks still training, the final "all joined"
# round, and the model sync from the last rank to join.
report("exit_all_reduces", counts["all_reduce"] - before_exit["all_reduce"])
report("exit_broadcasts", counts["_broadcast_coalesced"] - before_exit["_broadcast_coalesced"])
