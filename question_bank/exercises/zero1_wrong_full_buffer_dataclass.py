from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass
class _State:
    momentum: torch.Tensor  # one buffer as long as the whole vector; only our slice is used


class ShardedMomentumSGD:
    def __init__(self, flat_param, lr=0.1, momentum=0.9):
        self.param, self.lr, self.beta = flat_param, lr, momentum
        self.world = dist.get_world_size()
        self.size = flat_param.numel() // self.world
        self.lo = dist.get_rank() * self.size
        self.state = _State(torch.zeros_like(flat_param))

    def step(self, flat_grad):
        grad = torch.empty(self.size, dtype=flat_grad.dtype)
        dist.reduce_scatter_tensor(grad, flat_grad.contiguous())
        buf = self.state.momentum[self.lo:self.lo + self.size]
        buf.mul_(self.beta).add_(grad / self.world)
        mine = self.param[self.lo:self.lo + self.size]
        mine.sub_(self.lr * buf)
        dist.all_gather_into_tensor(self.param, mine.clone())
