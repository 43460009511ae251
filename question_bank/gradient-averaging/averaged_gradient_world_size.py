# Every rank feeds x = rank + 1 into the same bias-free linear layer.
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Linear(1, 1, bias=False)
ddp = DDP(model)
ddp(torch.full((1, 1), float(rank + 1))).sum().backward()
report("local_grad_would_be", float(rank + 1))
report("weight_grad", model.weight.grad.item())
