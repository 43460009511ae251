import torch
import torch.distributed as dist


def global_mean(values):
    """The mean of `values` over every sample on every rank, returned on every rank."""
    total = values.sum()
    dist.all_reduce(total)
    return (total / values.numel()).item()
