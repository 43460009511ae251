# The trained weights, raw (compared in the app with the reference solution's), and
# against one process replaying the same samples the way DDP with Join averages them:
# the mean over the ranks still training, divided by the initial world size (Join's default).
import torch as _torch
from torch import nn as _nn

report("steps", steps)
_w = _torch.cat([p.detach().flatten() for p in model.parameters()])
report("final_weights", _w)

_torch.manual_seed(0)
_m = _nn.Linear(4, 1)
_o = _torch.optim.SGD(_m.parameters(), lr=0.1)
_data = [[_torch.full((2, 4), float(r + i + 1)) for i in range(3 if r == 0 else 2)]
         for r in range(world_size)]
for _i in range(3):
    _o.zero_grad()
    _active = [r for r in range(world_size) if _i < len(_data[r])]
    (sum(_m(_data[r][_i]).sum() for r in _active) / world_size).backward()
    _o.step()
_single = _torch.cat([p.detach().flatten() for p in _m.parameters()])
report("matches_single_process", bool((_w - _single).abs().max() <= 1e-6))
