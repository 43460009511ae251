# Checks: three SGD steps of a three-layer model (six parameter tensors) under DDP with
# mean_hook registered, different data on every rank, against one process that averages
# every rank's gradient itself. The engine counts the all-reduces the hook makes.
import copy as _copy

import torch as _torch
from torch import nn as _nn
from torch.nn.parallel import DistributedDataParallel as _DDP

_torch.manual_seed(0)
_model = _nn.Sequential(_nn.Linear(4, 8), _nn.Tanh(), _nn.Linear(8, 8), _nn.Tanh(), _nn.Linear(8, 2))
_plain = _copy.deepcopy(_model)


def _data(r, step):
    return _torch.randn(5, 4, generator=_torch.Generator().manual_seed(10 * r + step))


def _flat(tensors):
    return _torch.cat([t.detach().flatten() for t in tensors])


_ddp = _DDP(_model)
_ddp.register_comm_hook(None, mean_hook)
_opt = _torch.optim.SGD(_model.parameters(), lr=0.1)
_plain_opt = _torch.optim.SGD(_plain.parameters(), lr=0.1)
for _step in range(3):
    _opt.zero_grad()
    _ddp(_data(rank, _step)).pow(2).mean().backward()
    if _step == 0:
        report("grads_step1", _flat(p.grad for p in _model.parameters()))
    _opt.step()
    _grads = []
    for _r in range(world_size):
        _plain.zero_grad()
        _plain(_data(_r, _step)).pow(2).mean().backward()
        _grads.append([p.grad.clone() for p in _plain.parameters()])
    for _i, _p in enumerate(_plain.parameters()):
        _p.grad = sum(g[_i] for g in _grads) / world_size
    _plain_opt.step()

report("weights", _flat(_model.parameters()))
report("weights_ok", bool(_torch.allclose(_flat(_model.parameters()), _flat(_plain.parameters()), atol=1e-6)))
del _ddp
