# The same number of bytes all-reduced as many small tensors or as one large
# one. Each call pays a fixed start-up cost (alpha); the bytes pay per byte (beta).
import time

import torch
import torch.distributed as dist

pieces = params["pieces"]
total_elems = 64 * 256  # 64 KiB of float32 in total
small = [torch.ones(total_elems // pieces) for _ in range(pieces)]
big = torch.ones(total_elems)


def timed(fn, repeats=3):
    best = float("inf")
    for _ in range(repeats):
        dist.barrier()
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def many_small():
    for t in small:
        dist.all_reduce(t)


def one_big():
    dist.all_reduce(big)


one_big()
many_small()  # warm-up
t_small = timed(many_small)
t_big = timed(one_big)
# A wide margin: on a shared machine times jitter, but per-call overhead is
# large next to the cost of moving 64 KiB over loopback.
report("small_calls_slower_by_2x", t_small > 2 * t_big)
report("ratio_rounded", round(t_small / t_big))
