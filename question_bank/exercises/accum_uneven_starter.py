import torch.nn.functional as F


def accumulate(ddp, micro_batches):
    """Forward and backward over one accumulation window on this rank.

    `micro_batches` is a list of (x, y) pairs whose sizes differ, and ranks may hold
    different numbers of them. Afterwards every parameter's .grad must hold the gradient of
    the mean squared error over all of the window's samples on all ranks pooled together:
    what one backward over one batch made of all of them would give. DDP may reduce the
    gradients only once per window.

    This version is the recipe for micro-batches of equal size: each micro-batch's mean
    loss divided by their number.
    """
    k = len(micro_batches)
    *early, (x_last, y_last) = micro_batches
    with ddp.no_sync():
        for x, y in early:
            (F.mse_loss(ddp(x), y) / k).backward()
    (F.mse_loss(ddp(x_last), y_last) / k).backward()
