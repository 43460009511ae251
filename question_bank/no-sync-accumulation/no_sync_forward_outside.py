# Four micro-batches; no_sync is used on the first three, but where does the forward run?
import contextlib

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Linear(2, 1, bias=False)
ddp = DDP(model)
micro_batches = [torch.full((1, 2), float(rank * 4 + i + 1)) for i in range(4)]
for i, x in enumerate(micro_batches):
    last = i == len(micro_batches) - 1
    if last:
        ddp(x).sum().backward()
    elif params["forward_inside"]:
        with ddp.no_sync():
            loss = ddp(x).sum()
            loss.backward()
    else:
        loss = ddp(x).sum()  # forward outside the context
        with ddp.no_sync():
            loss.backward()  # only backward inside
report("accumulated_grad", model.weight.grad)
