# A model with an auxiliary head that forward never uses.
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(2, 2, bias=False)
        self.head = nn.Linear(2, 1, bias=False)
        self.aux_head = nn.Linear(2, 1, bias=False)  # never called in forward

    def forward(self, x):
        return self.head(self.body(x))


torch.manual_seed(0)
model = Net()
mode = params["mode"]
ddp = DDP(model, find_unused_parameters=(mode == "find_unused_parameters"),
          static_graph=(mode == "static_graph"))
for step in range(1, 4):
    ddp(torch.ones(1, 2)).sum().backward()
    report("iterations_done", step)
report("aux_head_grad_is_none", model.aux_head.weight.grad is None)
