import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.main = nn.Linear(4, 1)
        self.aux = nn.Linear(4, 1)

    def forward(self, x, use_aux):
        h = torch.relu(self.body(x))
        out = self.main(h)
        return out + self.aux(h) if use_aux else out


model = TwoHeads()
# Which parameters a step uses changes from step to step: DDP must look for the unused ones.
ddp = DDP(model, find_unused_parameters=True, broadcast_buffers=False)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
steps = 0
for step in range(4):
    opt.zero_grad(set_to_none=False)
    out = ddp(torch.randn(2, 4), use_aux=bool(step % 2))
    out.sum().backward()
    opt.step()
    steps += 1
