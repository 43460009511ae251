from dataclasses import dataclass, field

import torch
import torch.distributed as dist


@dataclass
class _Shard:
    """The part of the optimizer this rank owns: its slice of the vector and its momentum."""

    start: int
    size: int
    momentum: torch.Tensor = field(repr=False)


class ShardedMomentumSGD:
    """SGD with momentum whose state is split across ranks (ZeRO stage 1)."""

    def __init__(self, flat_param, lr=0.1, momentum=0.9):
        self.param, self.lr, self.beta = flat_param, lr, momentum
        world = dist.get_world_size()
        size = flat_param.numel() // world
        self.shard = _Shard(dist.get_rank() * size, size,
                            torch.zeros(size, dtype=flat_param.dtype))
        self.world = world

    def step(self, flat_grad):
        s = self.shard
        mine = torch.empty(s.size, dtype=flat_grad.dtype)
        dist.reduce_scatter_tensor(mine, flat_grad.contiguous())
        s.momentum.mul_(self.beta).add_(mine, alpha=1.0 / self.world)
        part = self.param.narrow(0, s.start, s.size)
        part.add_(s.momentum, alpha=-self.lr)
        dist.all_gather_into_tensor(self.param, part.clone())
