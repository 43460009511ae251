# Every rank draws one local batch of params["local_batch"] samples for one
# synchronised step. Every sample of the global batch gets its own weight:
# sample s on rank r touches only weight[r * local + s], so the averaged
# gradient is non-zero exactly where a sample contributed to the step the
# optimizer will apply.
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

local = params["local_batch"]
model = nn.Linear(local * world_size, 1, bias=False)
nn.init.zeros_(model.weight)
ddp = DDP(model)
ids = torch.arange(local) + rank * local
local_batch = nn.functional.one_hot(ids, local * world_size).float()
ddp(local_batch).sum().backward()  # one synchronised step

report("local_batch", local_batch.shape[0])
report("global_batch", int((model.weight.grad != 0).sum().item()))
