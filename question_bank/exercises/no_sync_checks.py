import torch as _torch
import torch.distributed as _dist
from torch import nn as _nn


def _reference():
    # One process, the same data: every rank's micro-batch i of a step, averaged over ranks.
    _torch.manual_seed(0)
    m = _nn.Linear(6, 1)
    o = _torch.optim.SGD(m.parameters(), lr=0.05)
    for s in range(2):
        o.zero_grad()
        for i in range(4):
            for r in range(world_size):
                g = _torch.Generator().manual_seed(1000 * r + 10 * s + i)
                x = _torch.randn(4, 6, generator=g)
                (m(x).pow(2).mean() / 4 / world_size).backward()
        o.step()
    return _torch.cat([p.detach().flatten() for p in m.parameters()])


_w = _torch.cat([p.detach().flatten() for p in model.parameters()])
report("matches_reference", bool(_torch.allclose(_w, _reference(), atol=1e-5)))
_all = [_torch.zeros_like(_w) for _ in range(world_size)]
_dist.all_gather(_all, _w)
report("weights_match", all(_torch.equal(_all[0], t) for t in _all))
