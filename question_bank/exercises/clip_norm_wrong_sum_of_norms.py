import torch
import torch.distributed as dist


def clip_grad_norm_sharded(sharded_grads, replicated_grads, max_norm):
    sharded, replicated = list(sharded_grads), list(replicated_grads)
    # Squared norms add across ranks; norms do not. Replicated tensors are the same on
    # every rank, so they are added once, after the sum over ranks.
    local = torch.sqrt(sum(g.float().pow(2).sum() for g in sharded))
    dist.all_reduce(local)  # adds the ranks' norms
    total = torch.sqrt(local.pow(2) + sum(g.float().pow(2).sum() for g in replicated))
    scale = torch.clamp(max_norm / (total + 1e-6), max=1.0)  # never scales up
    for g in sharded + replicated:
        g.mul_(scale)
    return total
