# The learner's sync_gradients runs on a fresh model's gradients; the raw gradients are
# reported and compared, in the app, with the reference solution's on the same rank.
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
report("weight_grad", _m.weight.grad)
report("bias_grad", _m.bias.grad)
