# Four micro-batches per optimizer step; with no_sync, the first three skip synchronisation.
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
    skip = params["use_no_sync"] and not last
    with ddp.no_sync() if skip else contextlib.nullcontext():
        ddp(x).sum().backward()  # forward and backward both inside the context
report("accumulated_grad", model.weight.grad)
