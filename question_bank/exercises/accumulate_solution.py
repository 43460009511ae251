import torch.nn.functional as F


def accumulate(ddp, micro_batches):
    """Forward and backward over one accumulation window on this rank.

    `micro_batches` is a list of (x, y) pairs of the same size. Afterwards every parameter's
    .grad must hold the gradient of the mean squared error over all of the window's samples
    on all ranks: what one backward over all of them at once would give.
    """
    k = len(micro_batches)
    *early, (x_last, y_last) = micro_batches
    with ddp.no_sync():  # forward and backward inside: gradients only accumulate locally
        for x, y in early:
            (F.mse_loss(ddp(x), y) / k).backward()
    # Outside the context, the last backward all-reduces the accumulated sum once.
    (F.mse_loss(ddp(x_last), y_last) / k).backward()
