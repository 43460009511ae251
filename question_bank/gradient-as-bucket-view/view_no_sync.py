# Gradient accumulation over 3 micro-batches (no_sync for the first two) with and without
# gradient_as_bucket_view: the accumulated, averaged gradients after the third.
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def accumulate(as_view):
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    ddp = DDP(model, gradient_as_bucket_view=as_view)
    for mb in range(3):
        x = torch.full((2, 3), float(rank * 10 + mb + 1))
        if mb < 2:
            with ddp.no_sync():
                ddp(x).sum().backward()
        else:
            ddp(x).sum().backward()
    return model.weight.grad.clone(), model.weight.grad._base is not None


with_view, is_view = accumulate(True)
without_view, _ = accumulate(False)
report("same_gradients", torch.equal(with_view, without_view))
report("grad_is_view", is_view)
report("weight_grad", with_view)
