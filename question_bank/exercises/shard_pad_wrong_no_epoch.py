import math

import torch


def shard_indices(n, rank, world_size, shuffle=False, seed=0, epoch=0):
    if shuffle:
        g = torch.Generator()
        g.manual_seed(seed)  # the epoch is left out of the seed
        order = torch.randperm(n, generator=g).tolist()
    else:
        order = list(range(n))
    per_rank = math.ceil(n / world_size)
    total = per_rank * world_size
    # Pad by wrapping around to the start, as often as needed (n may be smaller than the padding).
    order = (order * math.ceil(total / n))[:total]
    return order[rank:total:world_size]
