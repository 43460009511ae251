from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F


class _Gather(torch.autograd.Function):
    """All-gather as an autograd op: forward gathers the rows of every rank; backward averages
    the full gradient over the ranks and hands this rank its own rows."""

    @staticmethod
    def forward(ctx, shard):
        n = dist.get_world_size()
        parts = [torch.empty_like(shard) for _ in range(n)]
        dist.all_gather(parts, shard.contiguous())
        return torch.cat(parts)

    @staticmethod
    def backward(ctx, grad_full):
        grad_full = grad_full.contiguous()
        dist.all_reduce(grad_full)
        return grad_full.tensor_split(dist.get_world_size())[dist.get_rank()] / dist.get_world_size()


@dataclass
class _Rows:
    weight: torch.Tensor  # this rank's block of rows (a leaf that takes gradients)
    gathered_at: int | None = None  # where the gathered weight lives while forward uses it


class WeightShardedMLP:
    def __init__(self, layers):
        n, r = dist.get_world_size(), dist.get_rank()
        self.state = [_Rows(layer.weight.detach().tensor_split(n)[r].clone().requires_grad_())
                      for layer in layers]

    @property
    def shards(self):
        return [s.weight for s in self.state]

    def forward(self, x):
        # F.linear saves its weight for backward; these hooks store a note instead of the
        # gathered weight and gather it again when backward asks for it.
        def pack(t):
            for i, s in enumerate(self.state):
                if s.gathered_at is not None and t.untyped_storage().data_ptr() == s.gathered_at:
                    return (i, t.size(), t.stride(), t.storage_offset())
            return t

        def unpack(saved):
            if isinstance(saved, tuple):
                i, size, stride, offset = saved
                with torch.no_grad():
                    full = _Gather.apply(self.state[i].weight)
                return full.as_strided(size, stride, offset)
            return saved

        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            last = len(self.state) - 1
            for i, s in enumerate(self.state):
                w = _Gather.apply(s.weight)
                s.gathered_at = w.untyped_storage().data_ptr()
                x = F.linear(x, w)
                s.gathered_at = None
                del w
                if i < last:
                    x = torch.tanh(x)
        return x

    def step(self, lr):
        with torch.no_grad():
            for s in self.state:
                s.weight.add_(s.weight.grad, alpha=-lr)
                s.weight.grad = None
