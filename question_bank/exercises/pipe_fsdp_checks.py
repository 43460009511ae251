# Checks: sixteen bias-free layers of 512 x 512 (16 MiB), the same on every rank, handed to
# PipelineFSDP and then dropped. One training step; pipeline p trains on its own batch (the
# inputs from stage 0's secret seed, the targets from stage 1's). Before and after it the driver
# measures, from outside, the memory each process holds: a quarter of the model (its half of
# its stage) and little more. Losses and the trained shards are compared, in the app, with the
# reference solution's on the same data; the driver counts the collectives and the bytes.
import torch as _torch
from torch import nn as _nn


def _digest(t, seed):
    """A random projection of the whole tensor (unit variance weights over its elements): any
    changed slice moves it, and rounding differences of a few ulps do not."""
    w = _torch.randn(t.numel(), generator=_torch.Generator().manual_seed(seed), dtype=_torch.float64)
    return float((t.detach().reshape(-1).double() * w).sum() / t.numel() ** 0.5)


_layers = [_nn.Linear(512, 512, bias=False) for _ in range(16)]
# The same full layers on every rank, drawn by the drivers from a seed only they hold: no rank
# can make them again instead of keeping (and gathering) its shards. Twice the default init's
# spread: the tanh layers do not all look linear.
with _torch.no_grad():
    for _l, _w in zip(_layers, secret_tensors("layers", [[512, 512]] * 16), strict=True):
        _l.weight.copy_(_w * (2.0 / (3 * 512) ** 0.5))
del _w
_m = PipelineFSDP(_layers)
del _layers, _l
mark_memory("between_steps")

_stage = rank // 2
_own = _torch.Generator().manual_seed(rank_seed)
_x = _torch.randn(6, 512, generator=_own) if _stage == 0 else None
_y = _torch.randn(6, 512, generator=_own) if _stage == 1 else None
_loss = _m.train_step(_x, _y, 0.05)
del _x, _y
mark_memory("between_steps")

report("loss", _loss if _stage == 1 else _loss is None)
report("shard_rows", _torch.stack([_s[:4, :32] for _s in (_m.shards[0], _m.shards[-1])]))
report("shard_digests", [_digest(_s, shared_seed + _i) for _i, _s in enumerate(_m.shards)])
