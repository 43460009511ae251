# Checks: a causal sequence of world_size chunks of 64 positions, d = 32, each rank's chunk of
# queries, keys and values drawn from its own secret seed (no rank knows another's keys); then
# again with the queries scaled by 30 (scores far above exp's float32 range). The outputs,
# reported as 4 projections per row, are compared in the app with the reference solution's on
# the same data; the driver counts the bytes each rank sends, compared with the reference's.
import torch as _torch

_C, _D = 64, 32
_P = _torch.randn(_D, 4, generator=_torch.Generator().manual_seed(shared_seed))
_own = _torch.Generator().manual_seed(rank_seed)

for _case, _qscale in ((1, 1.0), (2, 30.0)):
    _q, _k, _v = (_torch.randn(_C, _D, generator=_own) for _ in range(3))
    _out = ring_attention(_q * _qscale, _k, _v)
    report(f"output_{_case}", _out @ _P)
