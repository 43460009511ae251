import torch
import torch.distributed as dist


def find_corrupt_ranks(params):
    """The ranks whose replica differs from the majority's, bit for bit; the same sorted
    list on every rank ([] when all replicas agree).

    `params` is a list of float32 tensors that should be identical on every rank.

    This version compares float32 sums of the parameters.
    """
    mine = torch.stack([p.detach().sum() for p in params]).sum().reshape(1)
    every = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(every, mine)
    values = [c.item() for c in every]
    majority = max(set(values), key=values.count)
    return [r for r, v in enumerate(values) if v != majority]
