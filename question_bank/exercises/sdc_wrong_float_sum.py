from collections import Counter

import torch
import torch.distributed as dist


def _checksum(params):
    """The sum of every parameter: replicas that agree have equal sums."""
    total = torch.zeros(())
    for p in params:
        total += p.detach().sum()
    return total.reshape(1)


def find_corrupt_ranks(params):
    """The ranks whose replica differs from the majority's, bit for bit; the same sorted
    list on every rank ([] when all replicas agree).

    `params` is a list of float32 tensors that should be identical on every rank.
    """
    mine = _checksum(params)
    every = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(every, mine)  # one number per rank crosses the wire, not the parameters
    values = [c.item() for c in every]
    majority, _ = Counter(values).most_common(1)[0]
    return [r for r, v in enumerate(values) if v != majority]
