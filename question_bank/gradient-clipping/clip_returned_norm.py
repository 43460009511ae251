# Averaged gradient [3, 4, 0, 0]: rank 0's local gradient is [2, 8, 0, 0],
# rank 1's [4, 0, 0, 0] (the input itself, for a sum loss of a bias-free layer).
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Linear(4, 1, bias=False)
ddp = DDP(model)
x = torch.tensor([[2.0, 8.0, 0.0, 0.0]]) if rank == 0 else torch.tensor([[4.0, 0.0, 0.0, 0.0]])
ddp(x).sum().backward()
report("averaged_grad", model.weight.grad.flatten())
returned = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=params["max_norm"])
report("returned_norm", round(returned.item(), 4))
report("grad_after_clip", model.weight.grad.flatten().round(decimals=4))
report("norm_after_clip", round(model.weight.grad.norm().item(), 4))
