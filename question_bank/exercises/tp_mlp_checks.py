# Checks: the output against the full layers on one process, for two inputs; the weight
# elements the module keeps. The engine counts the collectives.
import torch as _torch
from torch import nn as _nn

_torch.manual_seed(0)  # the same full layers on every rank
_fc1 = _nn.Linear(8, 16)
_fc2 = _nn.Linear(16, 6)
_m = ParallelMLP(_fc1, _fc2)

with _torch.no_grad():
    _x = _torch.randn(4, 8, generator=_torch.Generator().manual_seed(1))
    _y = _m(_x)
    report("output", _y)
    report("output_ok", bool(_torch.allclose(_y, _fc2(_torch.relu(_fc1(_x))), atol=1e-6)))
    _x2 = 3 * _torch.randn(5, 8, generator=_torch.Generator().manual_seed(2))
    _y2 = _m(_x2)
    report("output_second", _y2)

# Elements of the 2-D parameters this rank keeps: 1/N of the two weight matrices.
report("weight_numel", sum(p.numel() for p in _m.parameters() if p.dim() >= 2))
