# Resume from a checkpoint that holds the model and an SGD-with-momentum state.
# Either only rank 0 loads it (the others keep a fresh init) or every rank does.
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def replicas_agree(tensor):
    copies = [torch.zeros_like(tensor) for _ in range(world_size)]
    dist.all_gather(copies, tensor.detach())
    return all(torch.equal(copies[0], c) for c in copies)


# Earlier run: one step, then rank 0 writes model and optimizer state.
torch.manual_seed(0)
model = nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
ddp = DDP(model)
ddp(torch.ones(1, 2)).sum().backward()
opt.step()
if rank == 0:
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, "resume.pt")
dist.barrier()
del ddp

# The resumed run: fresh objects, seeded differently on each rank.
torch.manual_seed(100 + rank)
model = nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
if params["load_on"] == "all" or rank == 0:
    checkpoint = torch.load("resume.pt", map_location="cpu")
    model.load_state_dict(checkpoint["model"])
    opt.load_state_dict(checkpoint["opt"])
ddp = DDP(model)  # broadcasts rank 0's parameters (and buffers), nothing else
report("weights_agree_after_wrap", replicas_agree(model.weight))
report("has_momentum", bool(opt.state))
ddp(torch.full((1, 2), float(rank + 1))).sum().backward()
report("grads_agree", replicas_agree(model.weight.grad))
opt.step()
report("weights_agree_after_step", replicas_agree(model.weight))
