# ZeroRedundancyOptimizer keeps each parameter's Adam state on one rank only.
# What does a plain opt.state_dict() give rank 0 when it wants to save?
import torch
from torch import nn
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 2))
ddp = DDP(model)
opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=0.01)
ddp(torch.randn(4, 8)).sum().backward()
opt.step()

total = sum(p.numel() for p in model.parameters())
# Adam keeps exp_avg and exp_avg_sq for the parameters this rank owns.
local = sum(t.numel() for s in opt.optim.state.values() for t in s.values() if t.dim() > 0)
report("state_fraction_of_full_adam", round(local / (2 * total), 3))
if params.get("consolidate_first", False):
    opt.consolidate_state_dict(to=0)  # a collective: every rank calls it
if rank == 0:
    try:
        saved = opt.state_dict()
        report("state_dict", "returned")
        held = sum(t.numel() for s in saved["state"].values() for t in s.values()
                   if torch.is_tensor(t) and t.dim() > 0)
        report("saved_fraction_of_full_adam", round(held / (2 * total), 3))
    except RuntimeError as exc:
        report("state_dict", "RuntimeError")
        report("asks_for_consolidate", "consolidate_state_dict(to=0)" in str(exc))
