# Local gradients differ by rank (input rank + 1); where is the norm computed?
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def agree(value):
    copies = [torch.zeros_like(value) for _ in range(world_size)]
    dist.all_gather(copies, value)
    return all(torch.allclose(copies[0], c) for c in copies)


torch.manual_seed(0)
model = nn.Linear(3, 1, bias=False)
ddp = DDP(model)
x = torch.full((1, 3), float(rank + 1))
if params["where"] == "inside_no_sync":
    with ddp.no_sync():  # backward without the gradient all-reduce
        ddp(x).sum().backward()
else:
    ddp(x).sum().backward()
report("grads_agree_before_clip", agree(model.weight.grad.clone()))
norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
report("total_norm", round(norm.item(), 4))
report("norms_agree", agree(norm.detach().reshape(1)))
report("grads_agree_after_clip", agree(model.weight.grad.clone()))
