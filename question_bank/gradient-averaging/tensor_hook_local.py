# A hook on the weight tensor (register_hook) records the gradient autograd computes; rank r's
# local gradient is r + 1. What does the hook see, and what ends up in .grad?
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

model = nn.Linear(1, 1, bias=False)
ddp = DDP(model)
seen = []
model.weight.register_hook(lambda g: seen.append(g.item()))
ddp(torch.full((1, 1), float(rank + 1))).sum().backward()
report("hook_saw", seen)
report("grad_after_backward", model.weight.grad.item())
