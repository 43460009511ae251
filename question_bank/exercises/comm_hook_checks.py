# Checks: three SGD steps of a three-layer model (six parameter tensors) under DDP with
# mean_hook registered, different data on every rank (from its secret seed). The gradients and
# weights are compared, in the app, with the reference solution's on the same data; the driver
# counts the all-reduces the hook makes.
import torch as _torch
from torch import nn as _nn
from torch.nn.parallel import DistributedDataParallel as _DDP

_model = _nn.Sequential(_nn.Linear(4, 8), _nn.Tanh(), _nn.Linear(8, 8), _nn.Tanh(), _nn.Linear(8, 2))
_data = _torch.Generator().manual_seed(rank_seed)


def _flat(tensors):
    return _torch.cat([t.detach().flatten() for t in tensors])


_ddp = _DDP(_model)  # DDP starts every replica from rank 0's weights
_ddp.register_comm_hook(None, mean_hook)
_opt = _torch.optim.SGD(_model.parameters(), lr=0.1)
for _step in range(3):
    _opt.zero_grad()
    _ddp(_torch.randn(5, 4, generator=_data)).pow(2).mean().backward()
    if _step == 0:
        report("grads_step1", _flat(p.grad for p in _model.parameters()))
    _opt.step()
report("weights", _flat(_model.parameters()))
del _ddp
