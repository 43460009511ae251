# Accumulating k micro-batches of 4 samples, each backward on its own mean loss, without
# dividing by k; against one backward on the mean loss of all 4k samples. Two DDP ranks.
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

k = params["k"]
g = torch.Generator().manual_seed(rank)
x, y = torch.randn(4 * k, 3, generator=g), torch.randn(4 * k, 1, generator=g)


def grads(accumulate):
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    ddp = DDP(model)
    if accumulate:
        for i in range(k):
            sl = slice(4 * i, 4 * i + 4)
            if i < k - 1:
                with ddp.no_sync():
                    nn.functional.mse_loss(ddp(x[sl]), y[sl]).backward()
            else:
                nn.functional.mse_loss(ddp(x[sl]), y[sl]).backward()
    else:
        nn.functional.mse_loss(ddp(x), y).backward()
    return model.weight.grad.clone()


ratio = (grads(True) / grads(False)).flatten()
report("ratio", [round(r, 4) for r in ratio.tolist()])
report("accumulated_over_large_batch", round(ratio.mean().item(), 4))
