import math
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.func import functional_call


@dataclass(frozen=True)
class _Slot:
    name: str
    start: int
    shape: torch.Size


class FlatParamModule:
    """Runs `module` with its parameters sharded over the ranks as one flat vector (FSDP-style)."""

    def __init__(self, module):
        self.module = module
        self.slots, offset, pieces = [], 0, []
        for name, p in module.named_parameters():
            self.slots.append(_Slot(name, offset, p.shape))
            offset += p.numel()
            pieces.append(p.detach().reshape(-1))
        world = dist.get_world_size()
        self.shard_size = math.ceil(offset / world)
        lo = dist.get_rank() * self.shard_size
        flat = torch.zeros(self.shard_size * world, dtype=pieces[0].dtype)
        torch.cat(pieces, out=flat[:offset])
        self.shard = flat[lo:lo + self.shard_size].clone()
        del flat, pieces
        for _, p in module.named_parameters():
            p.data = p.data.new_empty(0)  # the module's own full copy goes
        self._full = None

    def forward(self, x):
        full = self.shard.new_empty(self.shard_size * dist.get_world_size())
        dist.all_gather_into_tensor(full, self.shard)
        self._full = full.requires_grad_()
        views = {s.name: full.narrow(0, s.start, s.shape.numel()).view(s.shape) for s in self.slots}
        return functional_call(self.module, views, (x,))

    def reduce_grad(self):
        full, self._full = self._full, None
        mine = torch.empty_like(self.shard)
        dist.reduce_scatter_tensor(mine, full.grad)
        return mine.div_(dist.get_world_size())
