# Rank 0 holds b0 samples, rank 1 holds b1; mean-reduced loss per rank, DDP averaging. How much
# does one sample on each rank count in the averaged gradient? Measured by nudging one
# sample's input and watching the averaged gradient move (a bias-free 1x1 linear layer, sum of
# outputs as the per-sample loss, so a sample's gradient is its input).
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

sizes = [params["b0"], params["b1"]]


def averaged_grad(nudge_rank):
    model = nn.Linear(1, 1, bias=False)
    ddp = DDP(model)
    x = torch.ones(sizes[rank], 1)
    if rank == nudge_rank:
        x[0, 0] += 1.0                              # one sample's gradient grows by exactly 1
    ddp(x).mean().backward()
    return model.weight.grad.item()


base = averaged_grad(-1)
w0 = averaged_grad(0) - base
w1 = averaged_grad(1) - base
report("weight_of_a_rank0_sample", round(w0, 6))
report("weight_of_a_rank1_sample", round(w1, 6))
report("rank0_over_rank1", round(w0 / w1, 6))
