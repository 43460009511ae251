# Rank 0 has three batches, rank 1 has two.
import torch
from torch import nn
from torch.distributed.algorithms.join import Join
from torch.nn.parallel import DistributedDataParallel as DDP

model = nn.Linear(4, 1)
ddp = DDP(model)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
batches = [torch.randn(2, 4) for i in range(3 if rank == 0 else 2)]

steps = 0
with Join([ddp]):  # the generic context: DDP is a Joinable, a finished rank shadows the rest
    for steps, x in enumerate(batches, start=1):
        opt.zero_grad()
        ddp(x).sum().backward()
        opt.step()
