import torch
import torch.distributed as dist


class ShardedMomentumSGD:
    """SGD with momentum for a flat parameter that every rank holds in full.

    `flat_param` is the whole model as one 1-D tensor, the same on every rank, its length a
    multiple of the world size. `step(flat_grad)` takes this rank's own, unreduced gradient
    and updates `flat_param` in place.
    """

    def __init__(self, flat_param, lr=0.1, momentum=0.9):
        self.param = flat_param
        self.lr = lr
        self.momentum = momentum
        # The whole momentum buffer on every rank: N copies of the same state.
        self.buf = torch.zeros_like(flat_param)

    def step(self, flat_grad):
        grad = flat_grad.clone()
        dist.all_reduce(grad)
        grad /= dist.get_world_size()
        self.buf.mul_(self.momentum).add_(grad)
        self.param.sub_(self.lr * self.buf)
