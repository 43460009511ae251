# A loop under ddp.join() that also all-reduces its loss every step for logging.
# Rank 0 has three batches, rank 1 two.
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Linear(2, 1, bias=False)
ddp = DDP(model)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
batches = 3 if rank == 0 else 2
with ddp.join(throw_on_early_termination=params["throw_on_early_termination"]):
    for step in range(1, batches + 1):
        loss = ddp(torch.full((1, 2), float(step))).sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
        logged = loss.detach().clone()
        dist.all_reduce(logged)  # the metric Join knows nothing about
        report(f"steps_done", step)
