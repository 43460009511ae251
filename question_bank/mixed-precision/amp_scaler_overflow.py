# One rank's loss overflows (inf) in a GradScaler step; the other's is finite.
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def agree(value):
    copies = [torch.zeros_like(value) for _ in range(world_size)]
    dist.all_gather(copies, value)
    return all(torch.equal(copies[0], c) for c in copies)


torch.manual_seed(0)
model = nn.Linear(2, 1)
ddp = DDP(model)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
before = model.weight.detach().clone()

loss = ddp(torch.ones(1, 2)).sum()
if params["overflow"] == "rank1" and rank == 1:
    loss = loss * float("inf")  # stands in for an fp16 overflow on this rank only
scaler.scale(loss).backward()
report("grad_finite_after_backward", bool(torch.isfinite(model.weight.grad).all()))
scaler.step(opt)  # skipped if unscaling finds inf/NaN in this rank's gradients
scaler.update()
report("weights_changed", not torch.equal(before, model.weight.detach()))
report("replicas_agree", agree(model.weight.detach()))
report("scale_after_update", scaler.get_scale())
