# Two ranks each draw one local batch of 8 samples for one synchronised step.
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
ddp = DDP(nn.Linear(4, 1))
local_batch = torch.randn(8, 4)
ddp(local_batch).mean().backward()  # one synchronised step

samples = torch.tensor(float(local_batch.shape[0]))
dist.all_reduce(samples)  # how many samples fed this step's averaged gradient
report("local_batch", local_batch.shape[0])
report("global_batch", samples)
