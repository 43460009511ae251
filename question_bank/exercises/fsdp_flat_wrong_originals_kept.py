import math
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.func import functional_call


@dataclass
class _Backup:
    originals: dict  # the module's parameters as they were, "in case we need to unshard"


class FlatParamModule:
    def __init__(self, module):
        self.module = module
        named = list(module.named_parameters())
        self.names = [name for name, _ in named]
        self.shapes = [p.shape for _, p in named]
        self.backup = _Backup({name: p.detach() for name, p in named})
        flat = torch.cat([p.detach().flatten() for _, p in named])
        total = flat.numel()
        n, r = dist.get_world_size(), dist.get_rank()
        self.shard_size = math.ceil(total / n)
        flat = torch.cat([flat, flat.new_zeros(self.shard_size * n - total)])
        self.shard = flat[r * self.shard_size:(r + 1) * self.shard_size].clone()
        self.full = None
        for _, p in named:
            p.data = torch.empty(0)  # the module's copy goes, but the backup keeps every tensor

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
        self.full = None
        return grad
