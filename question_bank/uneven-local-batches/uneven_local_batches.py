# One DDP step where rank 0 has 1 sample and rank 1 has 3, mean loss per rank.
# Model: bias-free 1x1 linear layer, loss = mean(w * x), so d loss / d w = mean(x).
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Linear(1, 1, bias=False)
ddp = DDP(model)
# By default rank 0's batch is [2] and rank 1's [4, 6, 8].
first, gap = float(params.get("r1_first", 4)), float(params.get("r1_step", 2))
samples = [float(params.get("r0_sample", 2))] if rank == 0 else [first, first + gap, first + 2 * gap]
x = torch.tensor(samples).unsqueeze(1)
out = ddp(x)
if params["loss"] == "local_mean":
    loss = out.mean()
else:
    # Sum locally, divide by the global sample count, and undo DDP's 1/world_size.
    count = torch.tensor(float(len(samples)))
    dist.all_reduce(count)
    loss = out.sum() / count * world_size
loss.backward()
report("ddp_grad", model.weight.grad.item())
report("local_mean_x", sum(samples) / len(samples))
