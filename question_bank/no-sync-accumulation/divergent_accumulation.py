# Both ranks have four micro-batches, but disagree on the accumulation boundary:
# rank 0 steps every 2 micro-batches, rank 1 every 4 (a per-rank config bug).
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Linear(1, 1, bias=False)
ddp = DDP(model)
accumulate = 2 if rank == 0 else 4
syncs = 0
for i in range(4):
    x = torch.full((1, 1), 1.0)  # every micro-batch's local gradient is 1
    if (i + 1) % accumulate != 0:
        with ddp.no_sync():
            ddp(x).sum().backward()
        continue
    ddp(x).sum().backward()  # this rank's synchronising micro-batch
    syncs += 1
    report(f"grad_at_sync_{syncs}", model.weight.grad.item())
    model.weight.grad = None
