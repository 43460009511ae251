# Rank 0 has five batches, rank 1 three. The model carries BatchNorm buffers,
# which count the batches each replica has actually normalised.
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
ddp = DDP(model, broadcast_buffers=params["broadcast_buffers"])
opt = torch.optim.SGD(model.parameters(), lr=0.1)
batches = 5 if rank == 0 else 3
real_batches = 0
with ddp.join():
    for i in range(batches):
        x = torch.arange(8.0).view(4, 2) + 10 * rank + i
        ddp(x).sum().backward()
        opt.step()
        opt.zero_grad()
        real_batches += 1
report("real_batches", real_batches)
report("bn_batches_tracked", model[1].num_batches_tracked)
