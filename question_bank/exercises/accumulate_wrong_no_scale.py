import torch.nn.functional as F


def accumulate(ddp, micro_batches):
    *early, (x_last, y_last) = micro_batches
    with ddp.no_sync():
        for x, y in early:
            F.mse_loss(ddp(x), y).backward()  # each micro-batch's mean, summed k times
    F.mse_loss(ddp(x_last), y_last).backward()
