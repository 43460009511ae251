import torch
import torch.distributed as dist


def global_mean(values):
    """The mean of `values` over every sample on every rank, returned on every rank."""
    total = values.sum().reshape(1)
    count = torch.tensor([values.numel()], dtype=total.dtype)
    dist.all_reduce(total)  # the sum of every sample
    dist.all_reduce(count)  # how many samples there are in all
    return float(total / count)
