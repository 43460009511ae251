# Local micro-batches of params["micro_batch"] samples, params["accumulation_steps"]
# micro-batches per optimizer step; all but the last under no_sync().
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Linear(4, 1)
ddp = DDP(model)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
accumulation_steps = params["accumulation_steps"]
samples_this_step = 0
for i in range(accumulation_steps):
    x = torch.randn(params["micro_batch"], 4)
    samples_this_step += x.shape[0]
    if i < accumulation_steps - 1:
        with ddp.no_sync():
            (ddp(x).mean() / accumulation_steps).backward()
    else:
        (ddp(x).mean() / accumulation_steps).backward()
opt.step()
total = torch.tensor(float(samples_this_step))
dist.all_reduce(total)
report("samples_per_optimizer_step", total)
