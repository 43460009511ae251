# Local batches of 1 and 3 samples (inputs 1; 2, 3, 4) into a bias-free 1x1 linear layer; the
# per-sample gradient is the input. Each rank reduces its loss either by mean, by sum, or by
# sum divided by the global sample count over world size (the count all-reduced first).
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

inputs = [[1.0], [2.0, 3.0, 4.0]][rank]
pooled_mean = (1 + 2 + 3 + 4) / 4


def grad(how):
    model = nn.Linear(1, 1, bias=False)
    ddp = DDP(model)
    out = ddp(torch.tensor(inputs).view(-1, 1)).sum(dim=1)
    if how == "mean":
        loss = out.mean()
    elif how == "sum":
        loss = out.sum()
    else:
        count = torch.tensor([float(len(inputs))])
        dist.all_reduce(count)                       # the global number of samples, 4
        loss = out.sum() / (count.item() / world_size)
    loss.backward()
    return model.weight.grad.item()


report("grad_mean", grad("mean"))
report("grad_sum", grad("sum"))
report("grad_global_count", grad("global_count"))
report("pooled_mean", pooled_mean)
