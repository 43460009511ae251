# all_to_all_single: element j of rank r's input goes to rank j, and lands at
# position r of rank j's output. Rank r's input is [10r + 0, 10r + 1, ...],
# so every output element names where it came from (tens digit = source rank).
import torch
import torch.distributed as dist

send = torch.tensor([10.0 * rank + j for j in range(world_size)])
recv = torch.empty(world_size)
dist.all_to_all_single(recv, send)
report("received", recv)
