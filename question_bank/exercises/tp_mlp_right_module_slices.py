import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional as F


class ParallelMLP(nn.Module):
    """fc2(relu(fc1(x))) with its weights split over the ranks."""

    def __init__(self, fc1, fc2):
        super().__init__()
        n, r = dist.get_world_size(), dist.get_rank()
        h = fc1.out_features // n
        cols = torch.arange(r * h, (r + 1) * h)
        # Slices as layers of their own: index_select copies, so nothing points into the full weights.
        self.up = nn.Linear(fc1.in_features, h)
        self.down = nn.Linear(h, fc2.out_features, bias=False)
        with torch.no_grad():
            self.up.weight.copy_(fc1.weight.index_select(0, cols))
            self.up.bias.copy_(fc1.bias.index_select(0, cols))
            self.down.weight.copy_(fc2.weight.index_select(1, cols))
        self.register_buffer("out_bias", fc2.bias.detach().clone())

    def forward(self, x):
        partial = self.down(F.relu(self.up(x)))
        dist.all_reduce(partial)
        return partial + self.out_bias
