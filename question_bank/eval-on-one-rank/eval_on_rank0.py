# Two ranks train a model that has buffers (BatchNorm running stats), then
# rank 0 alone evaluates while rank 1 waits at a barrier for it to finish.
import datetime

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
# A group with a short timeout, so the hang ends in gloo's own error within seconds.
group = dist.new_group(timeout=datetime.timedelta(seconds=2))
model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Linear(4, 1))
ddp = DDP(model, process_group=group, broadcast_buffers=params["broadcast_buffers"])
opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
for step in range(2):
    ddp(torch.randn(8, 4) + rank).sum().backward()
    opt.step()
    opt.zero_grad()
report("training_steps", step + 1)

if rank == 0:
    ddp.eval()
    no_autograd = torch.inference_mode if params.get("grad_mode") == "inference_mode" else torch.no_grad
    with no_autograd():
        x = torch.randn(8, 4)
        # The line that matters: the wrapper's forward, or the bare module's.
        y = ddp(x) if params["eval_via"] == "ddp" else ddp.module(x)
    report("eval_finished", True)
dist.barrier(group=group)  # "wait until rank 0 has evaluated"
report("passed_barrier", True)
