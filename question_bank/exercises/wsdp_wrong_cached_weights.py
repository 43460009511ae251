import torch
import torch.distributed as dist


class _ShardedLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, shard, owner, i):
        ctx.save_for_backward(x, shard)
        ctx.owner, ctx.i = owner, i
        return x @ owner.full_weight(i).t()

    @staticmethod
    def backward(ctx, grad_out):
        x, shard = ctx.saved_tensors
        grad_x = grad_out @ ctx.owner.full_weight(ctx.i)
        grad_w = grad_out.t() @ x
        dist.all_reduce(grad_w)
        grad_w /= dist.get_world_size()
        rows = shard.shape[0]
        start = dist.get_rank() * rows
        return grad_x, grad_w[start:start + rows].clone(), None, None


class WeightShardedMLP:
    def __init__(self, layers):
        n, r = dist.get_world_size(), dist.get_rank()
        self.shards = []
        for layer in layers:
            rows = layer.out_features // n
            self.shards.append(layer.weight.detach()[r * rows:(r + 1) * rows].clone().requires_grad_())
        self._cache = {}

    def full_weight(self, i):
        # Gather each layer once and reuse it: it saves the second all-gather in backward.
        if i not in self._cache:
            shard = self.shards[i].detach()
            full = torch.empty(shard.shape[0] * dist.get_world_size(), shard.shape[1])
            dist.all_gather_into_tensor(full, shard)
            self._cache[i] = full
        return self._cache[i]

    def forward(self, x):
        for i, shard in enumerate(self.shards):
            x = _ShardedLinear.apply(x, shard, self, i)
            if i < len(self.shards) - 1:
                x = torch.tanh(x)
        return x

    def step(self, lr):
        with torch.no_grad():
            for shard in self.shards:
                shard -= lr * shard.grad
                shard.grad = None
