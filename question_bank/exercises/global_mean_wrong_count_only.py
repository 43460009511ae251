import torch
import torch.distributed as dist


def global_mean(values):
    """The mean of `values` over every sample on every rank, returned on every rank."""
    count = torch.tensor(float(values.numel()))
    dist.all_reduce(count)
    return (values.sum() / count).item()
