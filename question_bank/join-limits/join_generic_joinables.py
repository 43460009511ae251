# DDP plus ZeroRedundancyOptimizer, which shards optimizer state and broadcasts
# updated parameters from each shard's owner in every step(). Uneven inputs.
import torch
from torch import nn
from torch.distributed.algorithms.join import Join
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
ddp = DDP(model)
opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.SGD, lr=0.1)
batches = 3 if rank == 0 else 2
joinables = [ddp, opt] if params["include_optimizer"] else [ddp]
done = 0
with Join(joinables):
    for step in range(1, batches + 1):
        ddp(torch.full((1, 2), float(step))).sum().backward()
        opt.step()
        opt.zero_grad()
        done += 1
        report("steps_done", done)
report("last_weight", model[1].weight.round(decimals=4))
