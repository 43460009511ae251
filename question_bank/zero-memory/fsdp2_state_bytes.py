# What does one rank keep between steps under FSDP2, byte by byte? Parameters,
# gradients and Adam's moments are counted by their local shards (DTensor
# .to_local()) after one full step, per parameter of the whole model.
import torch
from torch import nn
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor

policy = {
    "bf16_fp32_reduce": MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32),
    "none": MixedPrecisionPolicy(),
}[params.get("policy", "bf16_fp32_reduce")]
reshard = params.get("reshard", True)

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 64), nn.Linear(64, 64), nn.Linear(64, 64))  # 12,480 parameters
full_numel = sum(p.numel() for p in model.parameters())
for block in model:
    fully_shard(block, mp_policy=policy, reshard_after_forward=reshard)
fully_shard(model, mp_policy=policy, reshard_after_forward=reshard)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)

model(torch.randn(8, 64)).float().sum().backward()
opt.step()


def nbytes(t):
    t = t.to_local() if isinstance(t, DTensor) else t
    return t.numel() * t.element_size()


param_bytes = sum(nbytes(p) for p in model.parameters())
grad_bytes = sum(nbytes(p.grad) for p in model.parameters())
adam_bytes = sum(nbytes(s[k]) for s in opt.state.values() for k in ("exp_avg", "exp_avg_sq"))
report("param_bytes_per_param", round(param_bytes / full_numel, 3))
report("grad_bytes_per_param", round(grad_bytes / full_numel, 3))
report("adam_bytes_per_param", round(adam_bytes / full_numel, 3))
report("total_bytes_per_param", round((param_bytes + grad_bytes + adam_bytes) / full_numel, 3))
report("param_dtype", str(next(model.parameters()).to_local().dtype))
report("grad_dtype", str(next(model.parameters()).grad.to_local().dtype))
# Anything left gathered (a plain tensor instead of a DTensor) after the step?
gathered = [p for p in model.parameters() if not isinstance(p, DTensor)]
report("unsharded_params_after_step", sum(p.numel() for p in gathered))
