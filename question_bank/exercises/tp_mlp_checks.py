# Checks: the same full layers on every rank (fc1 1024 -> 2048, fc2 2048 -> 1024: 16 MiB of
# weights, large enough that a memory mark's megabyte of run-to-run noise cannot blur half
# from whole, drawn by the driver from a seed only the drivers hold, so no rank can make them
# again), handed to ParallelMLP and then dropped by the checks: the driver measures, from
# outside, the memory this process still holds (the slices, 1/N of it). Two forwards on inputs
# every rank shares are compared, in the app, with the reference solution's outputs; the
# driver counts the collectives.
import torch as _torch
from torch import nn as _nn

_fc1 = _nn.Linear(1024, 2048)
_fc2 = _nn.Linear(2048, 1024)
with _torch.no_grad():
    for _p, _w in zip([_fc1.weight, _fc1.bias, _fc2.weight, _fc2.bias],
                      secret_tensors("layers", [[2048, 1024], [2048], [1024, 2048], [1024]]),
                      strict=True):
        _p.copy_(_w * 0.03)
del _p, _w
_m = ParallelMLP(_fc1, _fc2)
del _fc1, _fc2
mark_memory("after_init")

_shared = _torch.Generator().manual_seed(shared_seed)
with _torch.no_grad():
    report("output", _m(_torch.randn(4, 1024, generator=_shared))[:, :64])
    report("output_second", _m(3 * _torch.randn(5, 1024, generator=_shared))[:, :64])
