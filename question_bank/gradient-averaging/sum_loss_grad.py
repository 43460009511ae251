# Each rank has `batch` samples, every one with input 1.0 into a bias-free 1x1 linear layer,
# so every sample's gradient for the weight is exactly 1. The loss is summed (not averaged)
# over the local samples.
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

model = nn.Linear(1, 1, bias=False)
ddp = DDP(model)
ddp(torch.ones(params["batch"], 1)).sum().backward()
report("grad", model.weight.grad.item())
