# Rank 0 has three batches, rank 1 has two.
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

model = nn.Linear(4, 1)
ddp = DDP(model)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
batches = [torch.randn(2, 4) for i in range(3 if rank == 0 else 2)]

steps = 0
for i in range(3):
    opt.zero_grad()
    if i < len(batches):
        ddp(batches[i]).sum().backward()
        steps += 1
    else:
        # Out of data: keep rank 0 company with an all-zero batch.
        ddp(torch.zeros(2, 4)).sum().backward()
    opt.step()
