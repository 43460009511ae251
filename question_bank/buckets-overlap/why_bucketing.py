# 120 small gradient tensors (a ResNet-like model has ~160), each reduced on its own,
# against the same numbers reduced as one flat buffer, as a DDP bucket would.
import time

import torch
import torch.distributed as dist

torch.manual_seed(rank)
grads = [torch.randn(64) for _ in range(120)]


def per_tensor():
    out = [g.clone() for g in grads]
    for t in out:
        dist.all_reduce(t)  # one collective per parameter tensor
    return out


def bucketed():
    flat = torch.cat(grads)
    dist.all_reduce(flat)  # one collective for the whole bucket
    return list(flat.split(64))


def best_of(fn, repeats=3):
    times = []
    for _ in range(repeats):
        dist.barrier()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


one_by_one, as_bucket = per_tensor(), bucketed()  # also warms up the connections
ratio = best_of(per_tensor) / best_of(bucketed)
report("collectives_per_tensor", len(grads))
# Timing on a shared machine varies, so report a wide-margin comparison, not a time.
report("per_tensor_over_3x_slower", ratio > 3)
report("same_sums", all(torch.allclose(a, b) for a, b in zip(one_by_one, as_bucket, strict=True)))
report("ratio_rounded", round(ratio))
