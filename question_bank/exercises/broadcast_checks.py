import torch as _torch
import torch.distributed as _dist
from torch import nn as _nn

_w = _torch.cat([p.detach().flatten() for p in model.parameters()])
_all = [_torch.zeros_like(_w) for _ in range(world_size)]
_dist.all_gather(_all, _w)
report("weights_match", all(_torch.equal(_all[0], t) for t in _all))
_torch.manual_seed(0)
_rank0_init = _torch.cat([p.detach().flatten() for p in _nn.Linear(4, 2).parameters()])
report("started_from_rank0", bool(_torch.equal(
    _torch.cat([t.flatten() for t in initial]), _rank0_init)))
