# Four ranks run 2 steps of "compute, then all_reduce". Rank `slow_rank` computes 200 ms
# longer than the others (a throttled GPU, a slow data loader). Each rank times its compute
# and its wait inside the all-reduce; the timings are all-gathered and read like a fleet
# monitor would.
import time

import torch
import torch.distributed as dist

slow = params["slow_rank"]
compute_ms, wait_ms = [], []
for step in range(2):
    t0 = time.perf_counter()
    time.sleep(0.02 + (0.20 if rank == slow else 0.0))    # this rank's forward and backward
    t1 = time.perf_counter()
    dist.all_reduce(torch.ones(1024))
    t2 = time.perf_counter()
    compute_ms.append((t1 - t0) * 1000)
    wait_ms.append((t2 - t1) * 1000)

mine = torch.tensor([sum(compute_ms) / 2, sum(wait_ms) / 2])
table = [torch.zeros(2) for _ in range(world_size)]
dist.all_gather(table, mine)
compute = [t[0].item() for t in table]
wait = [t[1].item() for t in table]
report("longest_compute_rank", max(range(world_size), key=lambda r: compute[r]))
report("shortest_wait_rank", min(range(world_size), key=lambda r: wait[r]))
report("longest_wait_rank_is_straggler", max(range(world_size), key=lambda r: wait[r]) == slow)
report("others_wait_over_120ms", all(wait[r] > 120 for r in range(world_size) if r != slow))
report("straggler_waits_under_60ms", wait[slow] < 60)
