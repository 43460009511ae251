import torch.nn.functional as F


def accumulate(ddp, micro_batches):
    k = len(micro_batches)
    for i, (x, y) in enumerate(micro_batches):
        loss = F.mse_loss(ddp(x), y) / k  # the forward runs outside no_sync
        if i < k - 1:
            with ddp.no_sync():
                loss.backward()
        else:
            loss.backward()
