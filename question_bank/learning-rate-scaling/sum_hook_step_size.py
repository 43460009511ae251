# Every rank has identical data, so every rank's local gradient is the same g.
# Compare one SGD step through DDP with the step a single process would take.
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def sum_hook(state, bucket):
    work = dist.all_reduce(bucket.buffer(), op=dist.ReduceOp.SUM, async_op=True)
    return work.get_future().then(lambda fut: fut.value()[0])


torch.manual_seed(0)
x = torch.randn(4, 3)
single = nn.Linear(3, 1, bias=False)
torch.manual_seed(0)
model = nn.Linear(3, 1, bias=False)
start = model.weight.detach().clone()

# The single-process step with the job's old learning rate, for reference.
base_lr = params["base_lr"]
single(x).mean().backward()
single_update = -base_lr * single.weight.grad

ddp = DDP(model)
if params["hook"] == "sum":
    ddp.register_comm_hook(state=None, hook=sum_hook)
lr = base_lr / world_size if params["lr_choice"] == "divided_by_world_size" else base_lr
opt = torch.optim.SGD(model.parameters(), lr=lr)
ddp(x).mean().backward()
opt.step()
ddp_update = model.weight.detach() - start
ratio = (ddp_update.norm() / single_update.norm()).item()
report("update_ratio", round(ratio, 4))
# The learning rate that would have made this update equal the single-process one.
report("matching_lr", round(lr / ratio, 5))
