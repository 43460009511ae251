# Checks: a module of 2,101,251 parameters (8 MiB; not a multiple of 2 or 4), the same on every
# rank, its weights drawn by the drivers from a seed only they hold (no rank can make them again
# instead of keeping its shard), and two forward/backward passes with different data on every rank (from its secret
# seed). The outputs and the gradient shards are compared, in the app, with the reference
# solution's on the same data; after each pass the driver measures this process's memory from
# outside (one shard at most may stay); it also counts the collectives.
import torch as _torch
from torch import nn as _nn

_net = _nn.Sequential(_nn.Linear(2048, 1024), _nn.Tanh(), _nn.Linear(1024, 3))
with _torch.no_grad():  # the same module on every rank
    for _p, _w in zip(_net.parameters(),
                      secret_tensors("module", [list(p.shape) for p in _net.parameters()]),
                      strict=True):
        _p.copy_(_w * 0.02)
del _p, _w
_fs = FlatParamModule(_net)
_data = _torch.Generator().manual_seed(rank_seed)

for _it in (1, 2):
    _out = _fs.forward(_torch.randn(4, 2048, generator=_data))
    report(f"output_{_it}", _out.detach())
    _out.pow(2).mean().backward()
    _g = _fs.reduce_grad()
    report(f"grad_shard_{_it}", _g[:64])
    report(f"grad_shard_{_it}_sum", _g.double().sum())
    del _out, _g
    mark_memory("after_pass")
