# Checks: two accumulation windows (4 micro-batches of 3 samples, then 2 of 3) with different
# data on every rank, from its secret seed. The gradients are compared, in the app, with the
# reference solution's on the same data; the driver counts the all-reduces DDP makes.
import torch as _torch
from torch import nn as _nn
from torch.nn.parallel import DistributedDataParallel as _DDP

_model = _nn.Sequential(_nn.Linear(6, 4), _nn.Tanh(), _nn.Linear(4, 2))
_ddp = _DDP(_model)  # every replica starts from rank 0's weights
_opt = _torch.optim.SGD(_model.parameters(), lr=0.1)
_data = _torch.Generator().manual_seed(rank_seed)

for _w, _k in ((1, 4), (2, 2)):
    _opt.zero_grad()
    accumulate(_ddp, [(_torch.randn(3, 6, generator=_data), _torch.randn(3, 2, generator=_data))
                      for _ in range(_k)])
    report(f"grads_window{_w}", _torch.cat([p.grad.flatten() for p in _model.parameters()]))
    _opt.step()
del _ddp
