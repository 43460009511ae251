# join(throw_on_early_termination=True): rank 0 has 3 batches, rank 1 has 2. Both ranks catch
# the error, then agree on what to do next with ordinary collectives.
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Linear(2, 1)
ddp = DDP(model)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
steps_done = 0
try:
    with ddp.join(throw_on_early_termination=True):
        for _ in range(3 if rank == 0 else 2):
            opt.zero_grad()
            ddp(torch.ones(4, 2)).sum().backward()
            opt.step()
            steps_done += 1
    raised = False
except RuntimeError:
    raised = True
dist.barrier()                                     # both ranks are here, with the group usable
w = model.weight.detach().clone()
both = [torch.zeros_like(w) for _ in range(world_size)]
dist.all_gather(both, w)
report("raised", raised)
report("steps_done", steps_done)
report("replicas_agree_after", torch.equal(both[0], both[1]))
