import torch
import torch.distributed as dist


class PipelineFSDP:
    """A stack of bias-free linear layers with tanh between them, on 4 ranks: 2 pipeline
    stages, each sharded 2 ways.

    Stage s = rank // 2 owns the first half of the layers (s = 0) or the second (s = 1);
    inside a stage, rank `rank % 2` should keep only its half of the rows of each of those
    weights (`self.shards`). Ranks p and p + 2 form pipeline p, which trains on its own batch.
    `train_step(x, y, lr)` gets x on stage 0 (y is None) and y on stage 1 (x is None), does
    one SGD step on the mean squared error averaged over both pipelines' batches, and
    returns the loss on stage 1 (None on stage 0).

    This version pipelines the stages but does not shard them: both ranks of a stage keep
    the stage's whole weights and all-reduce their gradients, as DDP would.
    """

    def __init__(self, layers):
        rank = dist.get_rank()
        self.stage, self.half = divmod(rank, 2)
        # Every rank creates both groups, in the same order; each rank uses its own stage's.
        groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
        self.group = groups[self.stage]
        per_stage = len(layers) // 2
        self.weights = [layer.weight.detach().clone().requires_grad_()
                        for layer in layers[self.stage * per_stage:(self.stage + 1) * per_stage]]
        # Only views into the whole weights.
        self.shards = [w.detach().chunk(2)[self.half] for w in self.weights]

    def _forward(self, h, weights):
        for i, w in enumerate(weights):
            h = h @ w.t()
            if i < len(weights) - 1 or self.stage == 0:  # no tanh after the model's last layer
                h = torch.tanh(h)
        return h

    def train_step(self, x, y, lr):
        weights = self.weights
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
        with torch.no_grad():
            for w in weights:
                # Sum over the two pipelines' gradients, then average.
                dist.all_reduce(w.grad, group=self.group)
                w -= lr * w.grad / 2
                w.grad = None
        return None if loss is None else loss.item()
