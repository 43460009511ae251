# A frozen embedding-like layer (requires_grad=False) in front of a trainable head,
# wrapped in plain DDP: find_unused_parameters is left at False.
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 1))
for p in model[0].parameters():
    p.requires_grad_(False)
ddp = DDP(model)
for step in range(1, 4):
    ddp(torch.randn(2, 4)).sum().backward()
    report("iterations_done", step)
report("frozen_grad_is_none", model[0].weight.grad is None)
