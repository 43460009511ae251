# The same local gradients, reduced two ways: a plain all_reduce and DDP's reducer.
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

x = torch.full((1, 2), float(rank + 1))

# 1. By hand: compute the local gradient, then all_reduce it with default arguments.
torch.manual_seed(0)
plain = nn.Linear(2, 1, bias=False)
plain(x).sum().backward()
manual = plain.weight.grad.clone()
dist.all_reduce(manual)
report("manual_all_reduce", manual)

# 2. Through DDP.
torch.manual_seed(0)
model = nn.Linear(2, 1, bias=False)
ddp = DDP(model)  # keep a reference: the reducer lives as long as this object
ddp(x).sum().backward()
report("ddp_grad", model.weight.grad)
