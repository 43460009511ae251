# Four ranks. Ranks 0 and 1 have two batches, ranks 2 and 3 only one.
# On the second step rank 0's local gradient is params["g0"], rank 1's params["g1"].
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Linear(1, 1, bias=False)
ddp = DDP(model)
g0, g1 = float(params["g0"]), float(params["g1"])
inputs = {0: [1.0, g0], 1: [1.0, g1], 2: [1.0], 3: [1.0]}[rank]
with ddp.join(divide_by_initial_world_size=params["divide_by_initial_world_size"]):
    for step, value in enumerate(inputs, start=1):
        ddp(torch.full((1, 1), value)).sum().backward()
        report(f"grad_step{step}", model.weight.grad.item())
        model.weight.grad = None
