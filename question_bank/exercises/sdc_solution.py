from collections import Counter

import torch
import torch.distributed as dist


def _checksum(params):
    """An exact fingerprint of the bits: every float32 read as an int32, summed in int64.
    Flipping any one bit changes it by a power of two; rounding never hides a change."""
    total = torch.zeros((), dtype=torch.int64)
    for p in params:
        total += p.detach().contiguous().view(torch.int32).sum(dtype=torch.int64)
    return total.reshape(1)


def find_corrupt_ranks(params):
    """The ranks whose replica differs from the majority's, bit for bit; the same sorted
    list on every rank ([] when all replicas agree).

    `params` is a list of float32 tensors that should be identical on every rank.
    """
    mine = _checksum(params)
    every = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(every, mine)  # one number per rank crosses the wire, not the parameters
    values = [int(c.item()) for c in every]
    majority, _ = Counter(values).most_common(1)[0]
    return [r for r, v in enumerate(values) if v != majority]
