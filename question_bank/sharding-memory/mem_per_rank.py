# What does one rank hold after one optimizer step (Adam by default, or SGD with
# momentum): parameter, gradient and optimizer-state elements, under plain DDP,
# DDP + ZeroRedundancyOptimizer (ZeRO stage 1) or FSDP2's fully_shard (ZeRO stage 3)?
import torch
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP


def local(t):
    return t.to_local() if hasattr(t, "to_local") else t  # FSDP2 uses DTensors


strategy = params.get("strategy", "ddp")
torch.manual_seed(0)
hidden = params.get("hidden", 64)
if params.get("layout", "one_big") == "one_big":
    model = nn.Sequential(nn.Linear(64, hidden), nn.Linear(hidden, 2))  # 4,160 + 130 elements at 64
elif params.get("layout") == "four_equal":
    model = nn.Sequential(*(nn.Linear(32, 32, bias=False) for _ in range(4)))  # 4 x 1,024
else:
    model = nn.Sequential(nn.Linear(32, 32), nn.Linear(32, 32))  # 1,056 + 1,056
full_params = sum(p.numel() for p in model.parameters())
optimizer = params.get("optimizer", "adam")
if optimizer == "adam":
    opt_class, opt_kwargs = torch.optim.Adam, {"lr": 0.01}  # exp_avg and exp_avg_sq per parameter
elif optimizer == "momentum":
    opt_class, opt_kwargs = torch.optim.SGD, {"lr": 0.01, "momentum": 0.9}  # one momentum buffer
else:
    opt_class, opt_kwargs = torch.optim.SGD, {"lr": 0.01}  # plain SGD keeps no state

if strategy == "fsdp":
    fully_shard(model)
    step_model, opt = model, opt_class(model.parameters(), **opt_kwargs)
    state_of = lambda: opt.state  # noqa: E731
else:
    step_model = DDP(model)
    if strategy == "zero":
        opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=opt_class, **opt_kwargs)
        state_of = lambda: opt.optim.state  # noqa: E731 - the local shard's optimizer
    else:
        opt = opt_class(model.parameters(), **opt_kwargs)
        state_of = lambda: opt.state  # noqa: E731

step_model(torch.randn(4, model[0].in_features)).sum().backward()
opt.step()

param_elems = sum(local(p).numel() for p in model.parameters())
grad_elems = sum(local(p.grad).numel() for p in model.parameters())
# Per-parameter state tensors; Adam's scalar step counters are ignored.
state_elems = sum(local(t).numel() for s in state_of().values() for t in s.values() if t.dim() > 0)
report("full_param_elems", full_params)
report("param_elems", param_elems)
report("grad_elems", grad_elems)
report("adam_state_elems", state_elems)
report("bytes_per_param", round(4 * (param_elems + grad_elems + state_elems) / full_params, 3))
