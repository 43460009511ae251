# Each rank takes a different branch of the model in the same step.
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class TwoBranches(nn.Module):
    def __init__(self):
        super().__init__()
        self.left = nn.Linear(1, 1, bias=False)
        self.right = nn.Linear(1, 1, bias=False)

    def forward(self, x, use_left):
        return self.left(x) if use_left else self.right(x)


torch.manual_seed(0)
model = TwoBranches()
ddp = DDP(model, find_unused_parameters=True)
ddp(torch.full((1, 1), float(params["x"])), use_left=(rank == 0)).sum().backward()  # local grad = x
report("left_grad", model.left.weight.grad)
report("right_grad", model.right.weight.grad)
report("left_grad_value", model.left.weight.grad.item())
