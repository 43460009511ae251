# A hand-written comm hook that sums the bucket across ranks, optionally dividing.
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def sum_hook(state, bucket):
    buf = bucket.buffer()
    if params["divide"]:
        buf.div_(dist.get_world_size())
    work = dist.all_reduce(buf, op=dist.ReduceOp.SUM, async_op=True)
    return work.get_future().then(lambda fut: fut.value()[0])


torch.manual_seed(0)
model = nn.Linear(2, 1, bias=False)
ddp = DDP(model)
ddp.register_comm_hook(state=None, hook=sum_hook)
ddp(torch.full((1, 2), float(rank + 1))).sum().backward()
report("weight_grad", model.weight.grad)
