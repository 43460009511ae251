# The per-process recipe, on CPU: the harness has already done the first two
# steps (one process per rank, init_process_group with gloo).
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

report("group_initialised", dist.is_initialized())
report("backend", dist.get_backend())
torch.manual_seed(0)
model = nn.Linear(4, 1)                    # the same model on every rank
ddp = DDP(model)                           # on GPUs: DDP(model.to(rank), device_ids=[rank])
opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
x = torch.randn(2, 4) + rank               # each rank's own data
ddp(x).sum().backward()
opt.step()
report("bias_after_step", round(model.bias.item(), 4))  # identical on every rank
