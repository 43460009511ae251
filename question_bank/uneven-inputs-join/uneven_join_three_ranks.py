# Three ranks under ddp.join() with 4, 3 and 2 batches. Each batch is a full DDP step.
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Linear(3, 1, bias=False)
ddp = DDP(model)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
batches = 4 - rank  # rank 0: 4, rank 1: 3, rank 2: 2

real_batches = 0
with ddp.join():
    for i in range(batches):
        ddp(torch.full((2, 3), float(rank + i))).sum().backward()
        opt.step()
        opt.zero_grad()
        real_batches += 1
report("real_batches", real_batches)
report("weight", model.weight.detach().round(decimals=4))
