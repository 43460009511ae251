import math

import torch
import torch.distributed as dist
from torch.func import functional_call


class FlatParamModule:
    """Runs `module` with all its parameters kept as one flat vector.

    `forward(x)` returns the module's output; after `loss.backward()`, `reduce_grad()`
    returns this rank's slice of the gradient averaged over ranks: elements
    [rank * shard_size, (rank + 1) * shard_size) of the flat gradient, zero-padded at the end
    so that every rank's slice has the same size.
    """

    def __init__(self, module):
        self.module = module
        named = list(module.named_parameters())
        self.names = [name for name, _ in named]
        self.shapes = [p.shape for _, p in named]
        flat = torch.cat([p.detach().flatten() for _, p in named])
        self.total = flat.numel()
        self.shard_size = math.ceil(self.total / dist.get_world_size())
        # Every rank keeps the whole flat vector, and the module keeps its own copy as well.
        self.flat = flat
        self.full = None

    def _views(self):
        views, offset = {}, 0
        for name, shape in zip(self.names, self.shapes):
            views[name] = self.full[offset:offset + shape.numel()].view(shape)
            offset += shape.numel()
        return views

    def forward(self, x):
        self.full = self.flat.clone().requires_grad_()
        return functional_call(self.module, self._views(), (x,))

    def reduce_grad(self):
        n, r = dist.get_world_size(), dist.get_rank()
        grad = self.full.grad.clone()
        dist.all_reduce(grad)
        grad /= n
        padded = torch.cat([grad, grad.new_zeros(self.shard_size * n - self.total)])
        return padded[r * self.shard_size:(r + 1) * self.shard_size].clone()
