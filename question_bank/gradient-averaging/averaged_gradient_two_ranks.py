# Two replicas start identical (same seed) but see different inputs.
# Which printed values agree across the ranks after one DDP step?
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Linear(2, 1, bias=False)
ddp = DDP(model)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.full((1, 2), float(2 * rank + 1))  # 1.0 on rank 0, 3.0 on rank 1
out = ddp(x)
loss = out.sum()
loss.backward()
report("loss", round(loss.item(), 4))
report("weight_grad", model.weight.grad)
opt.step()
report("weight_after_step", model.weight.detach().round(decimals=4))
