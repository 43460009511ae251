# Four ranks; DDP's built-in all-reduce hook is registered with a process group of two
# ranks as its state: ranks 0 and 1 share one group, ranks 2 and 3 another. Each rank's
# local gradient for the single weight is rank + 1.
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

pairs = [dist.new_group([0, 1]), dist.new_group([2, 3])]   # every rank creates every group, in order
torch.manual_seed(0)
model = nn.Linear(1, 1, bias=False)
ddp = DDP(model)
state = pairs[rank // 2] if params["state"] == "pair_group" else None   # None: the default group
ddp.register_comm_hook(state, default_hooks.allreduce_hook)
ddp(torch.full((1, 1), float(rank + 1))).sum().backward()

grads = [torch.zeros(1) for _ in range(world_size)]
dist.all_gather(grads, model.weight.grad.flatten())
report("grad", model.weight.grad.item())
report("all_grads", [g.item() for g in grads])
