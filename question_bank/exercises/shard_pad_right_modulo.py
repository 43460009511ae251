import math

import torch


def shard_indices(n, rank, world_size, shuffle=False, seed=0, epoch=0):
    """The dataset indices rank `rank` of `world_size` visits in epoch `epoch`."""
    if shuffle:
        order = torch.randperm(n, generator=torch.Generator().manual_seed(seed + epoch))
    else:
        order = torch.arange(n)
    per_rank = math.ceil(n / world_size)
    # Position i of the padded order is sample order[i mod n]: the padding wraps to the start.
    positions = torch.arange(rank, per_rank * world_size, world_size)
    return order[positions % n].tolist()
