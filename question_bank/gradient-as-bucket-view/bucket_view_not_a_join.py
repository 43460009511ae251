# Uneven inputs (rank 0: three batches, rank 1: two) with gradient_as_bucket_view=True.
import time

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Linear(2, 1, bias=False)
ddp = DDP(model, gradient_as_bucket_view=True)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
batches = 3 if rank == 0 else 2
for step in range(1, batches + 1):
    ddp(torch.full((1, 2), float(step))).sum().backward()
    opt.step()
    opt.zero_grad()
    report("steps_done", step)
if rank == 1:
    time.sleep(30)  # finished, but still alive
