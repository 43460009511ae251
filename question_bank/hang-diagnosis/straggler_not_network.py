# Rank 1's data loading is slow (a 300 ms stall) before one DDP step.
# Each rank times its own phases; time.perf_counter() is CLOCK_MONOTONIC, so
# times from the two ranks on one machine share an axis.
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
ddp = DDP(model)
x = torch.randn(16, 64)
for _ in range(2):  # warm up: buckets are rebuilt (with a collective) in the second forward
    ddp(x).sum().backward()
    model.zero_grad()

dist.barrier()
t0 = time.perf_counter()
if rank == 1:
    time.sleep(0.3)  # the straggler: slow input pipeline
t_data = time.perf_counter()
loss = ddp(x).sum()
t_fwd = time.perf_counter()
loss.backward()  # includes waiting for the gradient all-reduce to complete
t_bwd = time.perf_counter()


def ms(t):
    return round((t - t0) * 1000)


report("forward_start_ms", ms(t_data))
report("backward_start_ms", ms(t_fwd))
report("backward_done_ms", ms(t_bwd))
report("backward_call_ms", ms(t_bwd) - ms(t_fwd))
report("backward_call_over_200ms", (t_bwd - t_fwd) > 0.2)
report("data_wait_over_200ms", (t_data - t0) > 0.2)
