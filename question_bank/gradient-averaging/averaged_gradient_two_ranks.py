import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Linear(2, 1, bias=False)
ddp = DDP(model)
x = torch.full((1, 2), float(rank + 1))
ddp(x).sum().backward()
report("weight_grad", model.weight.grad)
