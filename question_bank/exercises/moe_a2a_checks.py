# Checks: 2 experts per rank (expert e on rank e // 2), each rank's experts and tokens drawn
# from its own secret seed (no rank knows another's), 64 tokens of width 64 per rank routed
# unevenly, then a second round where every token goes to expert 1, so that most ranks
# receive nothing. The outputs are compared, in the app, with the reference solution's on
# the same data; the driver counts the all_to_all_single calls and the bytes each rank sends.
import torch as _torch
from torch import nn as _nn

_D, _T, _PER = 64, 64, 2
_own = _torch.Generator().manual_seed(rank_seed)
_torch.manual_seed(rank_seed)
_mine = {e: _nn.Linear(_D, _D) for e in range(_PER * rank, _PER * (rank + 1))}

for _case in (1, 2):
    _x = _torch.randn(_T, _D, generator=_own)
    if _case == 1:  # uneven and asymmetric, some counts 0 on 4 ranks
        _ids = _torch.randint(0, _PER * world_size - 1, (_T,), generator=_own)
    else:
        _ids = _torch.ones(_T, dtype=_torch.long)
    with _torch.no_grad():
        _out = moe_forward(_x, _ids, _mine, _PER)
    report(f"output_{_case}", _out[:, :16])
    report(f"output_{_case}_sum", _out.double().sum(dim=1))
