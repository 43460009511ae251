# Two DDP ranks, plain SGD; rank 1's optimizer was built with a learning rate ten times rank
# 0's (a per-rank config slip). Three steps.
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Linear(2, 1)
ddp = DDP(model)
lr = 0.01 * (10 if rank == 1 else 1)
opt = torch.optim.SGD(model.parameters(), lr=lr)
for step in range(3):
    opt.zero_grad()
    ddp(torch.full((4, 2), float(step + 1))).sum().backward()
    g = model.weight.grad.detach().clone()
    both = [torch.zeros_like(g) for _ in range(world_size)]
    dist.all_gather(both, g)
    grads_agree = torch.equal(both[0], both[1])
    opt.step()
w = model.weight.detach().clone()
both = [torch.zeros_like(w) for _ in range(world_size)]
dist.all_gather(both, w)
report("grads_agree_last_step", grads_agree)
report("weights_agree", torch.equal(both[0], both[1]))
