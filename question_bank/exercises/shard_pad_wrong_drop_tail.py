import math

import torch


def shard_indices(n, rank, world_size, shuffle=False, seed=0, epoch=0):
    if shuffle:
        g = torch.Generator()
        g.manual_seed(seed + epoch)  # the same permutation on every rank, a new one each epoch
        order = torch.randperm(n, generator=g).tolist()
    else:
        order = list(range(n))
    per_rank = n // world_size  # equal shares by cutting the remainder off
    total = per_rank * world_size
    return order[rank:total:world_size]
