import math

import torch
import torch.distributed as dist


def clip_grad_norm_sharded(sharded_grads, replicated_grads, max_norm):
    """Clip the gradients of a model split over the ranks by its global L2 norm."""
    sharded, replicated = list(sharded_grads), list(replicated_grads)
    # Each rank's share of the squared norm, with the replicated part split evenly over the
    # ranks: after the sum, the replicated tensors count exactly once.
    n = dist.get_world_size()
    share = torch.stack([g.float().pow(2).sum() for g in sharded]).sum() if sharded else torch.zeros(())
    if replicated:
        share = share + torch.stack([g.float().pow(2).sum() for g in replicated]).sum() / n
    dist.all_reduce(share)
    total = math.sqrt(float(share))
    if total > max_norm:
        scale = max_norm / (total + 1e-6)
        for g in sharded + replicated:
            g.mul_(scale)
    return torch.tensor(total)
