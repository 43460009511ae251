import torch
import torch.distributed as dist


def accumulate(ddp, micro_batches):
    """Forward and backward over one accumulation window on this rank.

    `micro_batches` is a list of (x, y) pairs whose sizes differ, and ranks may hold
    different numbers of them. Afterwards every parameter's .grad must hold the gradient of
    the mean squared error over all of the window's samples on all ranks pooled together:
    what one backward over one batch made of all of them would give. DDP may reduce the
    gradients only once per window.
    """
    # Every rank needs the pooled number of elements before its first backward.
    count = torch.tensor([float(sum(y.numel() for _, y in micro_batches))])
    dist.all_reduce(count)
    # The pooled mean divides by the pooled count.
    scale = 1.0 / count.item()
    *early, (x_last, y_last) = micro_batches
    with ddp.no_sync():
        for x, y in early:
            ((ddp(x) - y).pow(2).sum() * scale).backward()
    ((ddp(x_last) - y_last).pow(2).sum() * scale).backward()
