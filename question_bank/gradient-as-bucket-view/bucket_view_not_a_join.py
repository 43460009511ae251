# Four ranks with gradient_as_bucket_view=True; rank 3's shard has one batch fewer
# (5 against 4), so ranks 0-2 start a fifth gradient all-reduce that rank 3 never joins.
import time

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Linear(4, 2)
ddp = DDP(model, gradient_as_bucket_view=True)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
batches = 4 if rank == 3 else 5
for step in range(1, batches + 1):
    ddp(torch.full((2, 4), float(step))).sum().backward()
    opt.step()
    opt.zero_grad()
    report("steps_done", step)
if rank == 3:
    time.sleep(30)  # finished, but still alive
