# Checks: twelve steps on a shard of 65,536 parameters per rank. On some steps one rank's
# gradient holds an inf or a NaN (which rank, and where, follow a seed every rank shares; the
# gradients come from each rank's secret seed). What each step returned, the scale, and the
# trained shard are compared, in the app, with the reference solution's on the same data; the
# driver counts the all-reduces and bounds the bytes each rank sends (the verdict is one
# number per rank, not the gradient).
import torch as _torch


def _digest(t, seed):
    """A random projection of the whole tensor (unit variance weights over its elements): any
    changed slice moves it, and rounding differences of a few ulps do not."""
    w = _torch.randn(t.numel(), generator=_torch.Generator().manual_seed(seed), dtype=_torch.float64)
    return float((t.detach().reshape(-1).double() * w).sum() / t.numel() ** 0.5)


_N = 65_536
_shared = _torch.Generator().manual_seed(shared_seed)
_own = _torch.Generator().manual_seed(rank_seed)
_shard = _torch.randn(_N, generator=_own)
_scaler = ShardedLossScaler(init_scale=1024.0, growth_interval=3, lr=0.1)

# Which rank overflows at which step: the last rank, rank 0, then another rank with a NaN.
# In between, three good steps in a row let the scale grow.
_bad = {1: world_size - 1, 5: 0, 8: int(_torch.randint(1, world_size, (1,), generator=_shared))}
_nan_step = 8
_applied, _scales = [], []
for _step in range(12):
    _grad = _torch.randn(_N, generator=_own) * _scaler.scale
    _where = int(_torch.randint(0, _N, (1,), generator=_shared))
    if _bad.get(_step) == rank:
        _grad[_where] = float("nan") if _step == _nan_step else float("inf")
    _applied.append(bool(_scaler.step(_shard, _grad)))
    _scales.append(float(_scaler.scale))
report("applied", _applied)
report("scales", _scales)
report("shard_head", _shard[:64])
report("shard_digest", _digest(_shard, shared_seed + 1))
