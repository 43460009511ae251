import torch.nn.functional as F


def accumulate(ddp, micro_batches):
    k = len(micro_batches)
    (x0, y0), *rest = micro_batches
    (F.mse_loss(ddp(x0), y0) / k).backward()  # the one synchronised backward comes first
    with ddp.no_sync():
        for x, y in rest:
            (F.mse_loss(ddp(x), y) / k).backward()
