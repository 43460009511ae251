# The learner's sync_gradients runs on a fresh model's gradients of this rank's own batch, drawn
# from this rank's secret seed (no other rank can compute it). The raw gradients are compared,
# in the app, with what these checks reported on the reference solution for the same data.
import torch as _torch
from torch import nn as _nn

_g = _torch.Generator().manual_seed(rank_seed)
_x, _y = _torch.randn(8, 3, generator=_g), _torch.randn(8, 1, generator=_g)
_torch.manual_seed(shared_seed)  # the same model on every rank
_m = _nn.Linear(3, 1)
_nn.functional.mse_loss(_m(_x), _y).backward()
sync_gradients(_m)
report("weight_grad", _m.weight.grad)
report("bias_grad", _m.bias.grad)
