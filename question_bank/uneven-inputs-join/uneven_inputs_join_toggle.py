# Rank 0 has three batches, rank 1 has two. Each batch is a full DDP step.
import contextlib
import time

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Linear(2, 1, bias=False)
ddp = DDP(model)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
batches = 3 if rank == 0 else 2

real_batches = 0
with ddp.join() if params["join"] else contextlib.nullcontext():
    for i in range(batches):
        ddp(torch.full((1, 2), float(i + 1))).sum().backward()
        opt.step()
        opt.zero_grad()
        real_batches += 1
        report("real_batches", real_batches)

report("weight", model.weight.round(decimals=4))
if not params["join"] and rank == 1:
    # Rank 1 is done with its data but still alive (say, writing a checkpoint),
    # so rank 0 is left waiting rather than seeing a closed connection.
    time.sleep(30)
