# A launcher started two processes (the process group is up), but the script
# wraps the model in nn.DataParallel instead of DDP. Each rank initialises its
# model with a different seed, as code that forgot to seed would.
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(rank)  # deliberately different initial weights per rank
model = nn.Linear(3, 1, bias=False)
if params["wrapper"] == "dataparallel":
    wrapped = nn.DataParallel(model)  # on this CPU-only machine: no devices, no threads
else:
    wrapped = DDP(model)


def same_on_all_ranks(t):
    copies = [torch.empty_like(t) for _ in range(world_size)]
    dist.all_gather(copies, t)
    return all(torch.equal(c, copies[0]) for c in copies)


report("weights_agree_after_wrapping", same_on_all_ranks(model.weight.detach()))
wrapped(torch.full((1, 3), 2.0 * rank + 1)).sum().backward()
report("grad", model.weight.grad)
report("grads_agree", same_on_all_ranks(model.weight.grad))
report("first_state_dict_key", next(iter(wrapped.state_dict())))
