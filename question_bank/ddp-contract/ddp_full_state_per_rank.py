# What does every DDP rank hold after one optimizer step?
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))  # 40 + 18 = 58 parameters
ddp = DDP(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
x = torch.randn(3, 4) + rank  # different data per rank
ddp(x).sum().backward()
opt.step()

report("param_count", sum(p.numel() for p in model.parameters()))
report("momentum_count", sum(opt.state[p]["momentum_buffer"].numel() for p in model.parameters()))
report("grad_count", sum(p.grad.numel() for p in model.parameters()))
# The same averaged gradient and the same step on every rank keep the replicas equal.
report("first_weight", model[0].weight[0, 0].item())
