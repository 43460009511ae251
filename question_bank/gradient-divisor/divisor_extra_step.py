# Rank 0 has three batches, rank 1 two. On rank 0's extra third step its local
# gradient is exactly params["last_grad"] (that input into a bias-free 1x1
# linear layer, sum loss).
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Linear(1, 1, bias=False)
ddp = DDP(model)
inputs = [1.0, 2.0, float(params["last_grad"])] if rank == 0 else [3.0, 2.0]
with ddp.join(divide_by_initial_world_size=params["divide_by_initial_world_size"]):
    for step, value in enumerate(inputs, start=1):
        ddp(torch.full((1, 1), value)).sum().backward()
        report(f"grad_step{step}", model.weight.grad.item())
        model.weight.grad = None
