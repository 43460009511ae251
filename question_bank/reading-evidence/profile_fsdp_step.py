# One FSDP2 training step of four Linear(512, 512) units, profiled in the third iteration.
# FSDP2 names its steps in the profile (FSDP::pre_forward, FSDP::all_gather, ...), with the
# unit's position in the Sequential in brackets. The knob asks FSDP2 to prefetch the next
# unit's all-gather explicitly in forward.
import torch
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.profiler import ProfilerActivity, profile

torch.manual_seed(0)
model = nn.Sequential(*[nn.Linear(512, 512) for _ in range(4)])
for layer in model:
    fully_shard(layer)
fully_shard(model)
if params["explicit_forward_prefetch"]:
    for this, following in zip(model[:-1], model[1:]):
        this.set_modules_to_forward_prefetch([following])
x = torch.randn(64, 512)
for _ in range(2):
    model(x).sum().backward()
with profile(activities=[ProfilerActivity.CPU]) as prof:
    model(x).sum().backward()
artifact("step", "profile", prof)

# In forward: does unit i + 1's all-gather start before unit i's matmul (aten::linear)?
events = sorted(prof.events(), key=lambda e: e.time_range.start)
gathers = [e for e in events if e.name.startswith("FSDP::all_gather (")]
linears = [e for e in events if e.name == "aten::linear"]
forward_gathers = gathers[:4]            # the first four are forward's, one per unit
report("forward_gather_units", [g.name.split("(")[1].rstrip(")") for g in forward_gathers])
report("next_gathered_before_compute",
       [forward_gathers[i + 1].time_range.start < linears[i].time_range.start for i in range(3)])
prefetches = [e.name for e in events if e.name.startswith("FSDP::backward_prefetch")]
report("backward_prefetches", prefetches)
