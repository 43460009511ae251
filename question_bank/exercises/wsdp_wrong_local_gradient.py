import torch
import torch.distributed as dist


def _gather(shard):
    """The full weight from every rank's block of rows (rank order)."""
    full = torch.empty(shard.shape[0] * dist.get_world_size(), shard.shape[1], dtype=shard.dtype)
    dist.all_gather_into_tensor(full, shard)
    return full


class _ShardedLinear(torch.autograd.Function):
    """y = x @ W.T where this rank holds only its rows of W. The full W exists only inside
    forward and inside backward: it is gathered for each, and nothing full is saved between."""

    @staticmethod
    def forward(ctx, x, shard):
        ctx.save_for_backward(x, shard)  # the shard and the input, never the gathered weight
        return x @ _gather(shard).t()

    @staticmethod
    def backward(ctx, grad_out):
        x, shard = ctx.saved_tensors
        grad_x = grad_out @ _gather(shard)  # gathered a second time
        grad_w = grad_out.t() @ x  # this rank's gradient of the whole weight
        rows = shard.shape[0]
        start = dist.get_rank() * rows
        return grad_x, grad_w[start:start + rows].clone()


class WeightShardedMLP:
    """`layers` (bias-free nn.Linear, the same on every rank) with tanh between them.

    Each rank keeps only its block of rows of every weight, in `self.shards`
    (rows [rank * out / N, (rank + 1) * out / N)). `forward(x)` returns the output;
    after `loss.backward()`, `step(lr)` applies plain SGD to the shards with the
    gradient averaged over the ranks.
    """

    def __init__(self, layers):
        n, r = dist.get_world_size(), dist.get_rank()
        self.shards = []
        for layer in layers:
            rows = layer.out_features // n
            block = layer.weight.detach()[r * rows:(r + 1) * rows].clone()
            self.shards.append(block.requires_grad_())

    def forward(self, x):
        for i, shard in enumerate(self.shards):
            x = _ShardedLinear.apply(x, shard)
            if i < len(self.shards) - 1:
                x = torch.tanh(x)
        return x

    def step(self, lr):
        with torch.no_grad():
            for shard in self.shards:
                shard -= lr * shard.grad
                shard.grad = None
