import torch
import torch.distributed as dist


def global_mean(values):
    """The mean of `values` over every sample on every rank, returned on every rank."""
    local = values.mean()
    dist.all_reduce(local)
    return (local / dist.get_world_size()).item()
