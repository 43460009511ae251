# Checks: a sequence of 256 positions, 8 heads of 32 dimensions, split over the ranks by
# position (each rank's Q, K and V from its secret seed), then a second call with 16 heads of
# 16. The outputs are compared, in the app, with the reference solution's on the same data;
# the driver counts the collectives and bounds the bytes each rank sends by the reference's:
# an all-to-all moves (N - 1)/N of each tensor, where gathering K and V moves N - 1 copies.
import torch as _torch


def _digest(t, seed):
    """A random projection of the whole tensor (unit variance weights over its elements): any
    changed slice moves it, and rounding differences of a few ulps do not."""
    w = _torch.randn(t.numel(), generator=_torch.Generator().manual_seed(seed), dtype=_torch.float64)
    return float((t.detach().reshape(-1).double() * w).sum() / t.numel() ** 0.5)


_own = _torch.Generator().manual_seed(rank_seed)
for _call, (_s, _h, _d) in enumerate(((256, 8, 32), (128, 16, 16)), start=1):
    _q, _k, _v = (_torch.randn(_s // world_size, _h, _d, generator=_own) for _ in range(3))
    _out = ulysses_attention(_q, _k, _v)
    report(f"out_{_call}_shape", list(_out.shape))
    report(f"out_{_call}_head", _out[:4].reshape(-1)[:256])
    report(f"out_{_call}_digest", [_digest(_out, shared_seed + 10 * _call + _j) for _j in range(4)])
