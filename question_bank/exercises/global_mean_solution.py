import torch
import torch.distributed as dist


def global_mean(values):
    """The mean of `values` over every sample on every rank, returned on every rank."""
    t = torch.stack([values.sum(), torch.tensor(float(values.numel()))])
    dist.all_reduce(t)
    return (t[0] / t[1]).item()
