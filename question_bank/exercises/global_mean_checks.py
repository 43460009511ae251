import torch as _torch

# Rank r holds r + 1 samples; sample values run 1, 2, 3, ... across ranks in rank order.
_start = sum(k + 1 for k in range(rank))
_values = _torch.arange(_start + 1, _start + rank + 2, dtype=_torch.float32)
_n = sum(k + 1 for k in range(world_size))
_expected = (_n + 1) / 2
_got = global_mean(_values.clone())
report("result", _got)
report("is_global_mean", isinstance(_got, float | int) and abs(float(_got) - _expected) < 1e-5)
