# Checks: two accumulation windows (4 micro-batches of 3 samples, then 2 of 3) with different
# data on every rank, against one process that takes one backward over every rank's samples
# of the window at once. The engine counts DDP's bucket reductions per iteration.
import copy as _copy

import torch as _torch
import torch.nn.functional as _F
from torch import nn as _nn
from torch.nn.parallel import DistributedDataParallel as _DDP

_torch.manual_seed(0)
_model = _nn.Sequential(_nn.Linear(6, 4), _nn.Tanh(), _nn.Linear(4, 2))
_plain = _copy.deepcopy(_model)
_ddp = _DDP(_model)
_opt = _torch.optim.SGD(_model.parameters(), lr=0.1)
_plain_opt = _torch.optim.SGD(_plain.parameters(), lr=0.1)


def _window(r, w, k):
    g = _torch.Generator().manual_seed(100 * w + r)
    return [(_torch.randn(3, 6, generator=g), _torch.randn(3, 2, generator=g)) for _ in range(k)]


def _flat_grads(m):
    return _torch.cat([p.grad.flatten() for p in m.parameters()])


for _w, _k in ((1, 4), (2, 2)):
    _opt.zero_grad()
    accumulate(_ddp, _window(rank, _w, _k))
    _g = _flat_grads(_model)
    report(f"grads_window{_w}", _g)
    _plain_opt.zero_grad()
    _xs, _ys = zip(*[mb for r in range(world_size) for mb in _window(r, _w, _k)])
    _F.mse_loss(_plain(_torch.cat(_xs)), _torch.cat(_ys)).backward()
    report(f"grads_window{_w}_ok", bool(_torch.allclose(_g, _flat_grads(_plain), atol=1e-6)))
    _opt.step()
    _plain_opt.step()
del _ddp
