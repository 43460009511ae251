# A backbone layer frozen either before or after the model is wrapped in DDP.
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 1))
if params["freeze"] == "before":
    for p in model[0].parameters():
        p.requires_grad_(False)
ddp = DDP(model)  # the reducer records which parameters need gradients here
if params["freeze"] == "after":
    for p in model[0].parameters():
        p.requires_grad_(False)
opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
for it in range(1, 4):
    ddp(torch.randn(2, 4)).sum().backward()
    opt.step()
    opt.zero_grad()
    report("iterations_done", it)
