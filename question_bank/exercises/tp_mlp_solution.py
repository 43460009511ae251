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
        # Row-parallel fc2: only the input columns that meet this rank's hidden units.
        self.w2 = nn.Parameter(fc2.weight.detach()[:, r * h:(r + 1) * h].clone())
        self.b2 = nn.Parameter(fc2.bias.detach().clone())

    def forward(self, x):
        hidden = torch.relu(x @ self.w1.t() + self.b1)  # ReLU is elementwise: safe on a slice
        partial = hidden @ self.w2.t()                  # this rank's share of the output
        dist.all_reduce(partial)                        # the only collective: sum the shares
        return partial + self.b2                        # the bias once, after the sum
