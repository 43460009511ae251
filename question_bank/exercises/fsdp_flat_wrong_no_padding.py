import math

import torch
import torch.distributed as dist
from torch.func import functional_call


class FlatParamModule:
    """Runs `module` with its parameters sharded over the ranks as one flat vector (FSDP-style).

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
        n, r = dist.get_world_size(), dist.get_rank()
        self.shard_size = math.ceil(self.total / n)
        self.shard = flat.chunk(n)[r].clone()  # the last rank's chunk comes out shorter
        self.full = None
        for _, p in named:
            p.data = torch.empty(0)  # the module's own full copy goes; forward supplies views

    def _views(self):
        views, offset = {}, 0
        for name, shape in zip(self.names, self.shapes):
            views[name] = self.full[offset:offset + shape.numel()].view(shape)
            offset += shape.numel()
        return views

    def forward(self, x):
        full = torch.empty(self.shard_size * dist.get_world_size(), dtype=self.shard.dtype)
        dist.all_gather_into_tensor(full, self.shard)
        self.full = full.requires_grad_()
        return functional_call(self.module, self._views(), (x,))

    def reduce_grad(self):
        grad = torch.empty_like(self.shard)
        dist.reduce_scatter_tensor(grad, self.full.grad)
        grad /= dist.get_world_size()
        self.full = None  # the unsharded parameter lives only between forward and here
        return grad
