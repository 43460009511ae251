# One DDP step of six Linear(512, 512) layers (1 MiB of float32 weight each), profiled with
# torch.profiler in the third iteration (DDP rebuilds its buckets after the first). The
# profile is the question's trace; the values below are read from the same events.
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import ProfilerActivity, profile

torch.manual_seed(0)
model = nn.Sequential(*[nn.Linear(512, 512) for _ in range(6)])
ddp = DDP(model, bucket_cap_mb=params["bucket_cap_mb"])
x = torch.randn(64, 512)
for _ in range(2):
    ddp(x).sum().backward()
with profile(activities=[ProfilerActivity.CPU]) as prof:
    ddp(x).sum().backward()
artifact("step", "profile", prof)

events = prof.events()
main = next(e.thread for e in events if e.name == "DistributedDataParallel.forward")
nodes = [e for e in events if e.name.startswith("autograd::engine::evaluate_function: ")
         and not e.name.endswith("AccumulateGrad")]
reduces = sorted((e for e in events if e.name == "gloo:all_reduce"), key=lambda e: e.time_range.start)
backward_end = max(e.time_range.end for e in nodes)
report("all_reduces", len(reduces))
report("on_main_thread", sum(e.thread == main for e in reduces))
report("first_starts_during_backward", reduces[0].time_range.start < backward_end)
report("last_starts_after_backward", reduces[-1].time_range.start >= backward_end)
