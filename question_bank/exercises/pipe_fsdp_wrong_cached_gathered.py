import torch
import torch.distributed as dist


class PipelineFSDP:
    """A stack of bias-free linear layers with tanh between them, on 4 ranks: 2 pipeline
    stages, each sharded 2 ways.

    Stage s = rank // 2 owns the first half of the layers (s = 0) or the second (s = 1);
    inside a stage, rank `rank % 2` keeps only its half of the rows of each of those weights
    (`self.shards`). Ranks p and p + 2 form pipeline p, which trains on its own batch.
    `train_step(x, y, lr)` gets x on stage 0 (y is None) and y on stage 1 (x is None), does
    one SGD step on the mean squared error averaged over both pipelines' batches, and
    returns the loss on stage 1 (None on stage 0).
    """

    def __init__(self, layers):
        rank = dist.get_rank()
        self.stage, self.half = divmod(rank, 2)
        # Every rank creates both groups, in the same order; each rank uses its own stage's.
        groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
        self.group = groups[self.stage]
        per_stage = len(layers) // 2
        self.shards = []
        for layer in layers[self.stage * per_stage:(self.stage + 1) * per_stage]:
            rows = layer.out_features // 2
            self.shards.append(layer.weight.detach()[self.half * rows:(self.half + 1) * rows].clone())

    def _gather(self, shard):
        full = torch.empty(2 * shard.shape[0], shard.shape[1])
        dist.all_gather_into_tensor(full, shard, group=self.group)
        return full

    def _forward(self, h, weights):
        for i, w in enumerate(weights):
            h = h @ w.t()
            if i < len(weights) - 1 or self.stage == 0:  # no tanh after the model's last layer
                h = torch.tanh(h)
        return h

    def train_step(self, x, y, lr):
        # Gather the stage's weights once and keep them: later steps need no all-gather.
        if not hasattr(self, "full"):
            self.full = [self._gather(s) for s in self.shards]
        weights = [w.detach().requires_grad_() for w in self.full]
        rank = dist.get_rank()
        if self.stage == 0:
            out = self._forward(x, weights)
            dist.send(out.detach(), dst=rank + 2)
            grad_out = torch.empty_like(out)
            dist.recv(grad_out, src=rank + 2)
            out.backward(grad_out)
            loss = None
        else:
            inp = torch.empty(y.shape[0], weights[0].shape[1])
            dist.recv(inp, src=rank - 2)
            inp.requires_grad_()
            loss = (self._forward(inp, weights) - y).pow(2).mean()
            loss.backward()
            dist.send(inp.grad, dst=rank - 2)
        for shard, w in zip(self.shards, weights):
            grad = torch.empty_like(shard)
            # Sum over the two pipelines' gradients, keeping this rank's rows; then average.
            dist.reduce_scatter_tensor(grad, w.grad, group=self.group)
            shard -= lr * grad / 2
        return None if loss is None else loss.item()
