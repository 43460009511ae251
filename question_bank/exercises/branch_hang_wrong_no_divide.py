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
    total = loss.detach().clone()
    dist.all_reduce(total)  # every rank takes part
    if rank == 0:
        logged.append(total.item())
