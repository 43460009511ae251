import contextlib

import torch.nn.functional as F


def accumulate(ddp, micro_batches):
    """Forward and backward over one accumulation window on this rank."""
    k = len(micro_batches)
    for i, (x, y) in enumerate(micro_batches):
        last = i == k - 1
        # Every micro-batch but the last runs inside no_sync(): DDP reduces once, at the last.
        with contextlib.nullcontext() if last else ddp.no_sync():
            loss = F.mse_loss(ddp(x), y) / k
            loss.backward()
