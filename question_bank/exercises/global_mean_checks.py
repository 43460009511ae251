# The value global_mean returns on each rank, raw: the app compares it with the reference
# solution's on the same rank and world size. Rank r holds r + 1 samples, drawn from its own
# secret seed: no rank can compute another's.
import torch as _torch

_values = _torch.rand(rank + 1, generator=_torch.Generator().manual_seed(rank_seed)) * 4
report("result", global_mean(_values.clone()))
