# Checks: three steps on a 128 x 128 weight (the same start on every rank, a different batch of
# data on every rank from its secret seed), reported as 16 random projections of the weights
# and compared, in the app, with the reference solution's on the same data. Then two steps on
# a flat parameter of 8 MiB, after each of which the driver measures this process's memory
# from outside. The driver also counts the collectives and the bytes on the wire.
import torch as _torch

_D = 128
_STEPS = 3
_shared = _torch.Generator().manual_seed(shared_seed)
_own = _torch.Generator().manual_seed(rank_seed)
_init = _torch.randn(_D * _D, generator=_shared) * 0.05
_P = _torch.randn(16, _D * _D, generator=_shared) / _D


def _grad(flat, x):
    w = flat.detach().view(_D, _D).clone().requires_grad_()
    (x @ w.t()).tanh().pow(2).mean().backward()
    return w.grad.flatten()


_flat = _init.clone()
_opt = ShardedMomentumSGD(_flat, lr=0.1, momentum=0.9)
for _s in range(_STEPS):
    _opt.step(_grad(_flat, _torch.randn(8, _D, generator=_own)))
report("weights_digest", _P @ _flat)
report("weights_head", _flat[:4])
del _opt, _P, _init

# The memory an optimizer keeps between steps: at most one slice of momentum on top of the
# parameter itself (8 MiB here; a slice is 8 MiB / world_size). The measure is exact to the
# page but moves by about a megabyte from run to run (Python's 1 MiB arenas), so right and
# wrong are kept 4 MiB or more apart. Only memory is measured here, so plain fills stand in
# for random data (the values are checked above).
_big = _torch.full((2**21,), 0.5)
_big_opt = ShardedMomentumSGD(_big, lr=0.1, momentum=0.9)
for _s in range(2):
    _g = _torch.full((_big.numel(),), 0.01 * (rank + 1))
    _big_opt.step(_g)
    del _g
    mark_memory("between_steps")
