# gradient_as_bucket_view=True with optimizer.zero_grad(set_to_none=True) between steps:
# are the gradients of later steps still views into DDP's bucket, and are they right?
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Linear(4, 4)
ddp = DDP(model, gradient_as_bucket_view=True)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
twin = nn.Linear(4, 4)
twin.load_state_dict(model.state_dict())
twin_ddp = DDP(twin)                                    # the default, for comparison
twin_opt = torch.optim.SGD(twin.parameters(), lr=0.1)
views = []
for step in range(3):
    x = torch.full((2, 4), float(rank + step + 1))
    for net, o in ((ddp, opt), (twin_ddp, twin_opt)):
        o.zero_grad(set_to_none=True)
        net(x).sum().backward()
    views.append(model.weight.grad._base is not None and model.bias.grad._base is not None)
    grads_match = torch.equal(model.weight.grad, twin.weight.grad)
    opt.step()
    twin_opt.step()
report("grads_are_views_each_step", views)
report("grads_match_default", grads_match)
report("weights_match_default", torch.equal(model.weight, twin.weight))
