import torch
import torch.distributed as dist


class ShardedMomentumSGD:
    """SGD with momentum whose state is split across ranks (ZeRO stage 1).

    `flat_param` is the whole model as one 1-D tensor, the same on every rank, its length a
    multiple of the world size. `step(flat_grad)` takes this rank's own, unreduced gradient
    and updates `flat_param` in place.
    """

    def __init__(self, flat_param, lr=0.1, momentum=0.9):
        self.param = flat_param
        self.lr = lr
        self.momentum = momentum
        self.n = dist.get_world_size()
        self.size = flat_param.numel() // self.n
        self.lo = dist.get_rank() * self.size
        # Only this rank's slice of the momentum: 1/N of the state.
        self.buf = torch.zeros(self.size, dtype=flat_param.dtype)

    def step(self, flat_grad):
        # Rank r receives the sum over ranks of slice r of the gradient, and nothing else.
        grad = torch.empty(self.size, dtype=flat_grad.dtype)
        dist.reduce_scatter_tensor(grad, flat_grad.contiguous())
        grad /= self.n
        self.buf.mul_(self.momentum).add_(grad)
        mine = self.param[self.lo:self.lo + self.size]
        mine.sub_(self.lr * self.buf)
        # Every rank updated one slice; gather them so every rank has the whole model again.
        dist.all_gather_into_tensor(self.param, mine.clone())
