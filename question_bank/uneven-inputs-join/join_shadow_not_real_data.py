# Under Join, count the real samples each rank contributes, and the loss it saw.
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Linear(2, 1, bias=False)
ddp = DDP(model)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
batches = 3 if rank == 0 else 2
samples_seen = 0
with ddp.join():
    for i in range(batches):
        x = torch.ones(4, 2) * (i + 1)
        ddp(x).mean().backward()
        opt.step()
        opt.zero_grad()
        samples_seen += x.shape[0]
report("samples_seen", samples_seen)
