import torch
import torch.distributed as dist


class WeightShardedMLP:
    """`layers` (bias-free nn.Linear, the same on every rank) with tanh between them.

    Each rank should keep only its block of rows of every weight, in `self.shards`
    (rows [rank * out / N, (rank + 1) * out / N)). `forward(x)` returns the output;
    after `loss.backward()`, `step(lr)` applies plain SGD to the shards with the
    gradient averaged over the ranks.

    This version is data parallelism with a whole replica on every rank: the numbers
    are right, but every rank stores every weight.
    """

    def __init__(self, layers):
        n, r = dist.get_world_size(), dist.get_rank()
        self.weights = [layer.weight.detach().clone().requires_grad_() for layer in layers]
        # The "shards" are only views into the full replicas.
        self.shards = [w.detach()[r * (w.shape[0] // n):(r + 1) * (w.shape[0] // n)]
                       for w in self.weights]

    def forward(self, x):
        for i, w in enumerate(self.weights):
            x = x @ w.t()
            if i < len(self.weights) - 1:
                x = torch.tanh(x)
        return x

    def step(self, lr):
        n = dist.get_world_size()
        with torch.no_grad():
            for w in self.weights:
                dist.all_reduce(w.grad)
                w.grad /= n
                w -= lr * w.grad
                w.grad = None
