# A head that forward never uses on any rank, under find_unused_parameters=True, trained with
# AdamW (weight decay 0.1) for 3 steps.
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.used = nn.Linear(2, 1)
        self.spare = nn.Linear(2, 1)               # never called in forward

    def forward(self, x):
        return self.used(x)


torch.manual_seed(0)
model = Model()
ddp = DDP(model, find_unused_parameters=True)
opt = torch.optim.AdamW(model.parameters(), lr=0.1, weight_decay=0.1)
spare_before = model.spare.weight.detach().clone()
for _ in range(3):
    opt.zero_grad()
    ddp(torch.ones(1, 2)).sum().backward()
    report("spare_grad_is_none", model.spare.weight.grad is None)
    opt.step()
report("spare_weight_changed", not torch.equal(spare_before, model.spare.weight.detach()))
report("spare_has_optimizer_state", len(opt.state[model.spare.weight]) > 0)
