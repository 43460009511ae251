# Rank 0 has three batches, rank 1 two. Someone "fixes" the uneven ending by
# putting a barrier after the loop, hoping it will hold rank 1 until rank 0 is done.
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Linear(2, 1, bias=False)
ddp = DDP(model)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
batches = 3 if rank == 0 else 2
for step in range(1, batches + 1):
    ddp(torch.full((1, 2), float(step))).sum().backward()
    opt.step()
    opt.zero_grad()
    report("steps_done", step)
dist.barrier()
report("passed_barrier", True)
