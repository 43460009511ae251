# Checks: six bias-free layers of 512 x 512 (6 MiB of weights), the same on every rank,
# handed to WeightShardedMLP and then dropped. One training step on different data on every
# rank (from its secret seed). After the forward and after the step the driver measures, from
# outside, the memory this process holds: the shards (1/N of the model), activations and a
# transient layer, never the whole model. The output, the input's gradient and the trained
# shards are compared, in the app, with the reference solution's on the same data; the driver
# counts the collectives and the bytes.
import torch as _torch
from torch import nn as _nn


def _digest(t, seed):
    """A random projection of the whole tensor (unit variance weights over its elements): any
    changed slice moves it, and rounding differences of a few ulps do not."""
    w = _torch.randn(t.numel(), generator=_torch.Generator().manual_seed(seed), dtype=_torch.float64)
    return float((t.detach().reshape(-1).double() * w).sum() / t.numel() ** 0.5)


_layers = [_nn.Linear(512, 512, bias=False) for _ in range(6)]
# The same full layers on every rank, drawn by the drivers from a seed only they hold: no rank
# can make them again instead of keeping (and gathering) its shards. Twice the default init's
# spread: the tanh layers do not all look linear.
with _torch.no_grad():
    for _l, _w in zip(_layers, secret_tensors("layers", [[512, 512]] * 6), strict=True):
        _l.weight.copy_(_w * (2.0 / (3 * 512) ** 0.5))
del _w  # larger weights: the tanh layers do not all look linear
_m = WeightShardedMLP(_layers)
del _layers, _l

_own = _torch.Generator().manual_seed(rank_seed)
_x = _torch.randn(8, 512, generator=_own).requires_grad_()  # as if a layer came before
_out = _m.forward(_x)
mark_memory("after_forward")
report("output", _out[:, :64].detach())
_out.pow(2).mean().backward()
report("input_grad", _x.grad[:, :64])
del _out, _x
_m.step(0.5)
mark_memory("after_step")

report("shard_rows", _torch.stack([_s.detach()[:4, :32] for _s in _m.shards]))
report("shards_digest", [_digest(_s, shared_seed + _i) for _i, _s in enumerate(_m.shards)])
