import torch as _torch
from torch import nn as _nn


def _batch(r):
    g = _torch.Generator().manual_seed(100 + r)
    return _torch.randn(8, 3, generator=g), _torch.randn(8, 1, generator=g)


def _model():
    _torch.manual_seed(7)
    return _nn.Linear(3, 1)


_m = _model()
_x, _y = _batch(rank)
_nn.functional.mse_loss(_m(_x), _y).backward()
sync_gradients(_m)

_ref = _model()
_xs, _ys = zip(*[_batch(r) for r in range(world_size)])
_nn.functional.mse_loss(_ref(_torch.cat(_xs)), _torch.cat(_ys)).backward()
_ok = all(_torch.allclose(p.grad, q.grad, atol=1e-6) for p, q in zip(_m.parameters(), _ref.parameters()))
report("matches_global_mean", bool(_ok))
report("grad_ratio", round((_m.weight.grad.norm() / _ref.weight.grad.norm()).item(), 4))
