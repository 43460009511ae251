# Rank 0 has three batches, rank 1 two; no Join. What rank 1 does after its
# loop decides what rank 0 sees.
import time

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Linear(2, 1, bias=False)
ddp = DDP(model)
batches = 3 if rank == 0 else 2
for step in range(1, batches + 1):
    ddp(torch.full((1, 2), float(step))).sum().backward()
    report("steps_done", step)

if rank == 1:
    report("loop_finished", True)
    if params["after_loop"] == "linger":
        time.sleep(30)  # alive but busy elsewhere: say, writing a checkpoint
    # "exit": the snippet ends here and the process exits
