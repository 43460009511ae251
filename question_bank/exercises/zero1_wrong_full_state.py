import torch
import torch.distributed as dist


class ShardedMomentumSGD:
    def __init__(self, flat_param, lr=0.1, momentum=0.9):
        self.param = flat_param
        self.lr = lr
        self.momentum = momentum
        self.n = dist.get_world_size()
        self.size = flat_param.numel() // self.n
        self.lo = dist.get_rank() * self.size
        # A full-size buffer of which only this rank's slice is ever used.
        self.buf = torch.zeros_like(flat_param)

    def step(self, flat_grad):
        grad = torch.empty(self.size, dtype=flat_grad.dtype)
        dist.reduce_scatter_tensor(grad, flat_grad.contiguous())
        grad /= self.n
        buf = self.buf[self.lo:self.lo + self.size]
        buf.mul_(self.momentum).add_(grad)
        mine = self.param[self.lo:self.lo + self.size]
        mine.sub_(self.lr * buf)
        dist.all_gather_into_tensor(self.param, mine.clone())
