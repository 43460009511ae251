# A hook that counts its calls, on a stack of `layers` Linear(4, 4) layers (two parameter
# tensors each) with a bucket cap far smaller than any one tensor. Three iterations.
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

torch.manual_seed(0)
model = nn.Sequential(*[nn.Linear(4, 4) for _ in range(params["layers"])])
ddp = DDP(model, bucket_cap_mb=1e-6)                       # about one byte: every tensor overflows it
calls = [0]


def counting_hook(state, bucket):
    calls[0] += 1
    return default_hooks.allreduce_hook(state, bucket)


ddp.register_comm_hook(None, counting_hook)
per_iteration = []
for _ in range(3):
    calls[0] = 0
    ddp(torch.ones(2, 4)).sum().backward()
    per_iteration.append(calls[0])
report("calls_per_iteration", per_iteration)
report("calls_iteration_3", per_iteration[2])
