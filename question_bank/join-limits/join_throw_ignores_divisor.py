# Ranks 0 and 1 have four batches, rank 2 three; Join is asked to throw on early termination.
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Linear(1, 1, bias=False)
ddp = DDP(model)
inputs = [1.0, 2.0, 4.0, 3.0] if rank < 2 else [3.0, 2.0, 1.0]
steps_done = 0
report("steps_done", steps_done)
with ddp.join(throw_on_early_termination=True,
              divide_by_initial_world_size=params["divide_by_initial_world_size"]):
    for value in inputs:
        ddp(torch.full((1, 1), value)).sum().backward()
        model.weight.grad = None
        steps_done += 1
        report("steps_done", steps_done)
