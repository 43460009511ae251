# A restarted job resumes. With a shared checkpoint both ranks load step 100;
# with "local_stale", rank 1 loads its own older file from step 90 (other
# weights, other momentum, other step). What does DDP's constructor fix?
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def checkpoint(step):
    torch.manual_seed(step)  # stands in for "the state saved at this step"
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
    opt.zero_grad()
    return model, opt, step


stale = params["resume"] == "local_stale" and rank == 1
model, opt, step = checkpoint(90 if stale else 100)
ddp = DDP(model)  # broadcasts rank 0's parameters and buffers


def same_on_all_ranks(t):
    copies = [torch.empty_like(t) for _ in range(world_size)]
    dist.all_gather(copies, t)
    return all(torch.equal(c, copies[0]) for c in copies)


report("weights_agree_after_ddp", same_on_all_ranks(model.weight.detach()))
momentum = opt.state[model.weight]["momentum_buffer"]
report("momentum_agrees_after_ddp", same_on_all_ranks(momentum))
report("step_agrees", same_on_all_ranks(torch.tensor([step])))

# Train "until step 103": each rank counts from the step it resumed at.
iterations = 0
while step < 103:
    ddp(torch.randn(2, 4)).sum().backward()
    opt.step()
    opt.zero_grad()
    step += 1
    iterations += 1
    report("iterations_done", iterations)
