# Each rank seeds its generator differently, so the two models start different.
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(rank)
model = nn.Linear(2, 1, bias=False)
report("weight_before_ddp", model.weight.round(decimals=4))
ddp = DDP(model)
report("weight_after_ddp", model.weight.round(decimals=4))
