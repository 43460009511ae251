# The same model, the same per-rank batches: DDP's gradients against FSDP2's
# (gathered with full_tensor() for the comparison) and against each rank's own,
# unsynchronised gradient.
import copy

import torch
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
base = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2))
local_model, ddp_model, fsdp_model = (copy.deepcopy(base) for _ in range(3))
ddp = DDP(ddp_model)
fully_shard(fsdp_model[0])
fully_shard(fsdp_model[2])
fully_shard(fsdp_model)

g = torch.Generator().manual_seed(100 + rank)            # each rank its own batch
x = torch.randn(4, 4, generator=g)
for m in (local_model, ddp, fsdp_model):
    m(x).sum().backward()

ddp_grads = [p.grad for p in ddp_model.parameters()]
fsdp_grads = [p.grad.full_tensor() for p in fsdp_model.parameters()]
local_grads = [p.grad for p in local_model.parameters()]
report("shard_rows_of_first_weight", fsdp_model[0].weight.grad.to_local().shape[0])
def all_close(xs, ys, scale=1.0):
    return all(torch.allclose(x, scale * y, atol=1e-6) for x, y in zip(xs, ys, strict=True))


diffs = [(a - b).abs().max().item() for a, b in zip(fsdp_grads, ddp_grads, strict=True)]
report("max_diff_fsdp_vs_ddp", max(diffs))
report("fsdp_equals_ddp", all_close(fsdp_grads, ddp_grads))
report("fsdp_equals_twice_ddp", all_close(fsdp_grads, ddp_grads, scale=2.0))
report("fsdp_equals_local", all_close(fsdp_grads, local_grads))
