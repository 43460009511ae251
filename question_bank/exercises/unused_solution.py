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
ddp = DDP(model, find_unused_parameters=True)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
steps = 0
for step in range(4):
    opt.zero_grad()
    ddp(torch.randn(2, 4), use_aux=step % 2 == 1).sum().backward()
    opt.step()
    steps += 1
