# Averaged gradient [a, b, 0, 0] (by default [3, 4, 0, 0]): rank 0's local
# gradient is [a - 1, 2b, 0, 0], rank 1's [a + 1, 0, 0, 0] (the input itself,
# for a sum loss of a bias-free layer).
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Linear(4, 1, bias=False)
ddp = DDP(model)
a, b = float(params["a"]), float(params["b"])
x = torch.tensor([[a - 1, 2 * b, 0.0, 0.0]]) if rank == 0 else torch.tensor([[a + 1, 0.0, 0.0, 0.0]])
ddp(x).sum().backward()
report("averaged_grad", model.weight.grad.flatten())
returned = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=params["max_norm"])
report("returned_norm", round(returned.item(), 4))
report("grad_after_clip", model.weight.grad.flatten().round(decimals=4))
report("norm_after_clip", round(model.weight.grad.norm().item(), 4))
