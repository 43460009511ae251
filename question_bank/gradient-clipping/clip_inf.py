# clip_grad_norm_ with norm_type=inf on two DDP ranks: the returned norm and the largest
# gradient after clipping. Rank r's input is (r + 1) * scale; grads averaged by DDP.
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

model = nn.Linear(3, 1, bias=False)
ddp = DDP(model)
scale = params["scale"]
x = torch.tensor([[1.0, -2.0, 3.0]]) * (rank + 1) * scale
ddp(x).sum().backward()
norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0, norm_type=float("inf"))
report("returned_norm", round(norm.item(), 5))
report("largest_after", round(model.weight.grad.abs().max().item(), 5))
