# Three ranks under ddp.join() with `batches` batches each. A counting comm hook sees every
# gradient-bucket reduction a rank takes part in, real or shadow (a joined rank all-reduces
# zeros to match the others' buckets).
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

model = nn.Linear(2, 1)
ddp = DDP(model)
calls = [0]


def counting_hook(state, bucket):
    calls[0] += 1
    return default_hooks.allreduce_hook(state, bucket)


ddp.register_comm_hook(None, counting_hook)
mine = params["batches"][rank]
with ddp.join():
    for _ in range(mine):
        ddp(torch.ones(1, 2)).sum().backward()
shadows = torch.tensor([calls[0] - mine])
everyone = [torch.zeros(1, dtype=shadows.dtype) for _ in range(world_size)]
dist.all_gather(everyone, shadows)
fewest = min(range(world_size), key=lambda r: params["batches"][r])
report("reductions", calls[0])
report("shadows_per_rank", [int(t) for t in everyone])
report("fewest_rank_shadows", int(everyone[fewest]))
