# Two ranks under ddp.join(divide_by_initial_world_size=...): rank 0 has two batches, rank 1
# one, so at step 2 rank 0 is alone; its local gradient there is 4. With or without DDP's
# built-in all-reduce comm hook registered.
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

model = nn.Linear(1, 1, bias=False)
ddp = DDP(model)
if params["hook"]:
    ddp.register_comm_hook(None, default_hooks.allreduce_hook)
inputs = [4.0, 4.0] if rank == 0 else [2.0]
with ddp.join(divide_by_initial_world_size=params["divide_by_initial_world_size"]):
    for step, value in enumerate(inputs, start=1):
        ddp(torch.full((1, 1), value)).sum().backward()
        report(f"grad_step{step}", model.weight.grad.item())
        model.weight.grad = None
