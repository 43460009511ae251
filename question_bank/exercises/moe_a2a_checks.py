# Checks: 2 experts per rank (expert e on rank e // 2), 6 tokens per rank routed unevenly, and
# a second round where every token goes to expert 1, so that most ranks receive nothing. The
# output is compared with every expert applied to its tokens on one process. The engine
# counts the all_to_all_single calls.
import torch as _torch
from torch import nn as _nn

_D, _T, _PER = 4, 6, 2


def _expert(e):
    _torch.manual_seed(1000 + e)
    return _nn.Linear(_D, _D)


_all = [_expert(e) for e in range(_PER * world_size)]
_mine = {e: _all[e] for e in range(_PER * rank, _PER * (rank + 1))}


def _round(r, case):
    g = _torch.Generator().manual_seed(10 * case + r)
    x = _torch.randn(_T, _D, generator=g)
    if case == 1:  # uneven and asymmetric: rank r sends rank j a different count than j sends r
        ids = (_torch.arange(_T) * (r + 1)) % (_PER * world_size)
    else:
        ids = _torch.ones(_T, dtype=_torch.long)
    return x, ids


for _case in (1, 2):
    _x, _ids = _round(rank, _case)
    with _torch.no_grad():
        _out = moe_forward(_x, _ids, _mine, _PER)
        _dense = _torch.stack([_all[int(e)](t) for t, e in zip(_x, _ids)])
    report(f"output_{_case}", _out)
    report(f"output_{_case}_ok", bool(_torch.allclose(_out, _dense, atol=1e-6)))
report("routed_to", _torch.bincount(_round(rank, 1)[1] // _PER, minlength=world_size))
