# The first of four blocks is checkpointed; its input is the raw batch, which
# does not require grad (think: the output of a frozen embedding). The other
# blocks run normally. Which blocks get gradients?
import warnings

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 16)

    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(x)))


torch.manual_seed(0)
blocks = nn.ModuleList(Block() for _ in range(4))
x = torch.randn(8, 16)                       # requires_grad=False
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    h = checkpoint(blocks[0], x, use_reentrant=params.get("use_reentrant", True))
    for b in blocks[1:]:
        h = b(h)
    h.sum().backward()

report("grad_is_none_per_block", [b.fc1.weight.grad is None for b in blocks])
report("warned_no_input_requires_grad", any("requires_grad" in str(w.message) for w in caught))
