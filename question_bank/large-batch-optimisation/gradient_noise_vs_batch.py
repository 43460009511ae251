# A one-weight regression y = 3x + noise. For many independent draws, each
# rank computes the gradient of its own mean loss over a local batch of 8,
# and DDP averages the ranks' gradients. How noisy is each, draw to draw?
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.set_num_threads(1)
local_batch, draws = 8, 120
torch.manual_seed(0)
model = nn.Linear(1, 1, bias=False)
with torch.no_grad():
    model.weight.fill_(0.0)
ddp = DDP(model)  # keep the reference

local_grads, averaged_grads = [], []
for draw in range(draws):
    g = torch.Generator().manual_seed(1000 * draw + rank)  # independent data per rank and draw
    x = torch.randn(local_batch, 1, generator=g)
    y = 3 * x + torch.randn(local_batch, 1, generator=g)
    loss = ((model(x) - y) ** 2).mean()
    local_grads.append(torch.autograd.grad(loss, model.weight)[0].item())  # this rank alone
    ((ddp(x) - y) ** 2).mean().backward()  # the same loss through DDP: averaged over ranks
    averaged_grads.append(model.weight.grad.item())
    model.weight.grad = None

var_local = torch.tensor(local_grads).var().item()
var_avg = torch.tensor(averaged_grads).var().item()
report("global_batch", local_batch * world_size)
report("variance_ratio", round(var_local / var_avg, 2))
report("ratio_near_world_size", 0.7 * world_size < var_local / var_avg < 1.3 * world_size)
report("mean_gradient_close", abs(sum(local_grads) / draws - sum(averaged_grads) / draws) < 0.5)
