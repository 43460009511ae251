# Four ranks, each with its own data. One optimizer step through DDP with a comm hook
# that sums and never divides, against the same step with DDP's default averaging.
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def sum_hook(state, bucket):
    work = dist.all_reduce(bucket.buffer(), op=dist.ReduceOp.SUM, async_op=True)
    return work.get_future().then(lambda fut: fut.value()[0])


def first_update(use_sum_hook):
    torch.manual_seed(0)
    model = nn.Linear(8, 1)
    start = [p.detach().clone() for p in model.parameters()]
    ddp = DDP(model)
    if use_sum_hook:
        ddp.register_comm_hook(state=None, hook=sum_hook)
    if params["optimizer"] == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    torch.manual_seed(100 + rank)
    ddp(torch.randn(16, 8)).pow(2).mean().backward()
    opt.step()
    return torch.cat([(p.detach() - s).flatten() for p, s in zip(model.parameters(), start, strict=True)])


summed = first_update(True)
averaged = first_update(False)
report("update_ratio", round((summed.norm() / averaged.norm()).item(), 3))
