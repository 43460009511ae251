import torch
import torch.distributed as dist
from torch import nn


class ParallelMLP(nn.Module):
    """fc2(relu(fc1(x))) with its weights split over the ranks.

    `fc1` and `fc2` are the full layers, identical on every rank. `forward(x)` gets the same
    full input on every rank and must return the full output on every rank.
    """

    def __init__(self, fc1, fc2):
        super().__init__()
        n, r = dist.get_world_size(), dist.get_rank()
        h = fc1.out_features // n
        # Column-parallel fc1: this rank computes hidden units [r*h, (r+1)*h).
        self.w1 = nn.Parameter(fc1.weight.detach()[r * h:(r + 1) * h].clone())
        self.b1 = nn.Parameter(fc1.bias.detach()[r * h:(r + 1) * h].clone())
        # fc2 is kept whole on every rank.
        self.fc2 = fc2

    def forward(self, x):
        hidden = torch.relu(x @ self.w1.t() + self.b1)
        # Collect every rank's hidden units, then run the full fc2 on all of them.
        parts = [torch.empty_like(hidden) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, hidden.contiguous())
        return self.fc2(torch.cat(parts, dim=1))
