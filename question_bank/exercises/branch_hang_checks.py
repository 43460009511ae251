import torch as _torch
import torch.distributed as _dist
from torch import nn as _nn
from torch.nn.parallel import DistributedDataParallel as _DDP


def _expected_losses():
    # The same training in this process on the same data, through a fresh DDP model.
    _torch.manual_seed(0)
    m = _nn.Linear(3, 1)
    d = _DDP(m)
    o = _torch.optim.SGD(m.parameters(), lr=0.1)
    out = []
    for s in range(3):
        x = _torch.full((2, 3), float(rank + s + 1))
        o.zero_grad()
        loss = d(x).pow(2).mean()
        loss.backward()
        o.step()
        t = loss.detach().clone()
        _dist.all_reduce(t)
        out.append(t.item() / world_size)
    return out


_expected = _expected_losses()
if rank == 0:
    report("logged_count", len(logged))
    report("logged_is_global_mean", len(logged) == 3 and all(
        abs(a - b) <= 1e-5 * max(1.0, abs(b)) for a, b in zip(logged, _expected)))
_w = _torch.cat([p.detach().flatten() for p in model.parameters()])
_all = [_torch.zeros_like(_w) for _ in range(world_size)]
_dist.all_gather(_all, _w)
report("weights_match", all(_torch.equal(_all[0], t) for t in _all))
