import torch
import torch.distributed as dist


def clip_grad_norm_sharded(sharded_grads, replicated_grads, max_norm):
    """Clip the gradients of a model split over the ranks by its global L2 norm.

    `sharded_grads` are this rank's gradients of the parameters that are split over the
    ranks: every rank holds different ones. `replicated_grads` are the gradients of the
    parameters every rank holds an identical full copy of. Scales all of them in place as
    torch.nn.utils.clip_grad_norm_ would scale the whole model's gradients, and returns the
    whole model's gradient norm (before clipping) on every rank.
    """
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
    scale = torch.clamp(max_norm / (total + 1e-6), max=1.0)  # never scales up
    for g in sharded + replicated:
        g.mul_(scale)
    return total
