# Checks: two accumulation windows with micro-batches of uneven sizes, and a different number
# of them on each rank (the sizes follow the rank; the data comes from the rank's secret seed).
# The gradients are compared, in the app, with the reference solution's on the same data (the
# gradient of the mean over every sample of every rank pooled); the driver counts the
# all-reduces, DDP's and the learner's.
import torch as _torch
from torch import nn as _nn
from torch.nn.parallel import DistributedDataParallel as _DDP

_torch.manual_seed(shared_seed)
_model = _nn.Sequential(_nn.Linear(6, 8), _nn.Tanh(), _nn.Linear(8, 2))
_ddp = _DDP(_model)
_opt = _torch.optim.SGD(_model.parameters(), lr=0.1)
_data = _torch.Generator().manual_seed(rank_seed)

_windows = {1: [1 + rank, 5, 2 + 3 * rank], 2: [7 - rank] + [2] * rank}
for _w, _sizes in _windows.items():
    _opt.zero_grad()
    accumulate(_ddp, [(_torch.randn(_n, 6, generator=_data), _torch.randn(_n, 2, generator=_data))
                      for _n in _sizes])
    report(f"grads_window{_w}", _torch.cat([p.grad.flatten() for p in _model.parameters()]))
    _opt.step()
report("weights", _torch.cat([p.detach().flatten() for p in _model.parameters()]))
del _ddp
