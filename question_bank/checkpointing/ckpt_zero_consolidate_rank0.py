# The plain-DDP habit "only rank 0 touches checkpoints", applied to
# ZeroRedundancyOptimizer: consolidate_state_dict is called inside `if rank == 0`.
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 2))
ddp = DDP(model)
opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=0.01)
ddp(torch.randn(4, 8)).sum().backward()
opt.step()
report("stepped", True)
if rank == 0:
    opt.consolidate_state_dict(to=0)
    report("consolidated", True)
    torch.save(opt.state_dict(), "opt.pt")
dist.barrier()  # "wait for rank 0's save"
report("passed_barrier", True)
