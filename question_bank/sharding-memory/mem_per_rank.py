# What does one rank hold after one Adam step: parameter, gradient and
# optimizer-state elements, under plain DDP, DDP + ZeroRedundancyOptimizer
# (ZeRO stage 1) or FSDP2's fully_shard (ZeRO stage 3)?
import torch
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP


def local(t):
    return t.to_local() if hasattr(t, "to_local") else t  # FSDP2 uses DTensors


strategy = params.get("strategy", "ddp")
torch.manual_seed(0)
if params.get("layout", "one_big") == "one_big":
    model = nn.Sequential(nn.Linear(64, 64), nn.Linear(64, 2))  # 4,160 + 130 elements
else:
    model = nn.Sequential(nn.Linear(32, 32), nn.Linear(32, 32))  # 1,056 + 1,056
full_params = sum(p.numel() for p in model.parameters())

if strategy == "fsdp":
    fully_shard(model)
    step_model, opt = model, torch.optim.Adam(model.parameters(), lr=0.01)
    state_of = lambda: opt.state  # noqa: E731
else:
    step_model = DDP(model)
    if strategy == "zero":
        opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=0.01)
        state_of = lambda: opt.optim.state  # noqa: E731 - the local shard's optimizer
    else:
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        state_of = lambda: opt.state  # noqa: E731

step_model(torch.randn(4, model[0].in_features)).sum().backward()
opt.step()

param_elems = sum(local(p).numel() for p in model.parameters())
grad_elems = sum(local(p.grad).numel() for p in model.parameters())
# exp_avg and exp_avg_sq per parameter; the scalar step counters are ignored.
state_elems = sum(local(t).numel() for s in state_of().values() for t in s.values() if t.dim() > 0)
report("full_param_elems", full_params)
report("param_elems", param_elems)
report("grad_elems", grad_elems)
report("adam_state_elems", state_elems)
report("bytes_per_param", round(4 * (param_elems + grad_elems + state_elems) / full_params, 3))
