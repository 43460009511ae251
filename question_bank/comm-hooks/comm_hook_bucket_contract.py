# Record what a comm hook is handed on each call.
import torch
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

calls = []


def recording_hook(state, bucket):
    calls.append({"index": bucket.index(), "elements": bucket.buffer().numel(),
                  "params": len(bucket.parameters())})
    return default_hooks.allreduce_hook(state, bucket)


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))  # 4 tensors, 58 numbers
ddp = DDP(model)
ddp.register_comm_hook(state=None, hook=recording_hook)
for step in range(2):
    ddp(torch.randn(3, 4)).sum().backward()
    report(f"hook_calls_step{step}", len(calls))
    calls.clear()
ddp(torch.randn(3, 4)).sum().backward()
report("elements_per_call", [c["elements"] for c in calls])
report("params_per_call", [c["params"] for c in calls])
