# Code written for single-process training zeroes gradients in place with detach_().
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Linear(2, 1)
ddp = DDP(model, gradient_as_bucket_view=params["gradient_as_bucket_view"])
for step in range(1, 3):
    ddp(torch.randn(3, 2)).sum().backward()
    for p in model.parameters():
        if params["zero_pattern"] == "detach_then_zero":
            p.grad.detach_()  # legacy pattern
            p.grad.zero_()
        else:
            p.grad.requires_grad_(False)  # what torch's own zero_grad does
            p.grad.zero_()
    report("steps_done", step)
