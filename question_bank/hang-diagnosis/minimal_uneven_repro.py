# A minimal two-rank reproduction: rank 0 always has three batches; rank 1's
# count is the one variable under test.
import time

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Linear(2, 1, bias=False)
ddp = DDP(model)
batches = 3 if rank == 0 else params["rank1_batches"]
for step in range(1, batches + 1):
    ddp(torch.full((1, 2), float(step))).sum().backward()
    report("steps_done", step)
if rank == 1 and batches < 3:
    time.sleep(30)  # stay alive, like a rank doing evaluation after its loop
