# Is param.grad its own tensor, or a view into DDP's communication bucket?
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 1))
ddp = DDP(model, gradient_as_bucket_view=params["gradient_as_bucket_view"])
for step in range(1, 3):
    ddp(torch.randn(2, 4)).sum().backward()
    grads = [p.grad for p in model.parameters()]
    report(f"grads_are_views_step{step}", all(g._base is not None for g in grads))
    # Views of one bucket share a single storage.
    report(f"distinct_grad_storages_step{step}",
           len({g.untyped_storage().data_ptr() for g in grads}))
    model.zero_grad(set_to_none=False)
