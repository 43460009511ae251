# The trained weights, raw: the app compares them with the reference solution's (which
# synchronises once per step) and here with one process synchronising every micro-batch.
import torch as _torch
from torch import nn as _nn


def _every_micro_batch():
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
report("final_weights", _w)
report("matches_every_micro_batch", bool((_w - _every_micro_batch()).abs().max() <= 1e-5))
