import torch
import torch.distributed as dist


class ShardedLossScaler:
    """Dynamic loss scaling for a sharded optimizer (plain SGD).

    Each rank updates only its own shard of the parameters, from its shard of the gradient
    of the *scaled* loss. `step(shard, grad)`: if the gradient of any rank holds an inf or a
    NaN, every rank skips its update, halves the scale and restarts the count of good steps;
    otherwise every rank applies `shard -= lr * grad / scale`, and after `growth_interval`
    good steps in a row the scale doubles. Returns True when the update was applied.
    """

    def __init__(self, init_scale=1024.0, growth_interval=3, lr=0.1):
        self.scale = init_scale
        self.growth_interval = growth_interval
        self.lr = lr
        self.good_steps = 0

    def step(self, shard, grad):
        # One number per rank says whether its shard overflowed; MAX makes it any rank's.
        found_inf = torch.isnan(grad).any().float().reshape(1)
        dist.all_reduce(found_inf, op=dist.ReduceOp.MAX)
        if found_inf.item() > 0:
            self.scale /= 2
            self.good_steps = 0
            return False
        with torch.no_grad():
            shard -= self.lr * grad / self.scale
        self.good_steps += 1
        if self.good_steps == self.growth_interval:
            self.scale *= 2
            self.good_steps = 0
        return True
