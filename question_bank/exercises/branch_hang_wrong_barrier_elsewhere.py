import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

model = nn.Linear(3, 1)
ddp = DDP(model)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
logged = []
for step in range(3):
    x = torch.randn(2, 3)
    opt.zero_grad()
    loss = ddp(x).pow(2).mean()
    loss.backward()
    opt.step()
    if rank == 0:
        total = loss.detach().clone()
        dist.all_reduce(total)
        logged.append(total.item() / dist.get_world_size())
    else:
        dist.barrier()  # wait while rank 0 logs
