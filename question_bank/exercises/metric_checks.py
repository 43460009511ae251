# Checks: two evaluation rounds with a different number of samples on every rank (one rank of
# four has none), each rank's samples drawn from its own secret seed. The accuracies are
# compared, in the app, with the reference solution's on the same data; the driver counts the
# all-reduces.
import torch as _torch

_C = 3
_SIZES = {1: [5, 2, 7, 0], 2: [3, 8, 0, 4]}
_own = _torch.Generator().manual_seed(rank_seed)

for _case in (1, 2):
    _n = _SIZES[_case][rank % 4]
    _logits = _torch.randn(_n, _C, generator=_own)
    _labels = _torch.randint(0, _C, (_n,), generator=_own)
    _overall, _per_class = global_accuracy(_logits, _labels, _C)
    report(f"overall_{_case}", _torch.as_tensor(_overall, dtype=_torch.float64))
    report(f"per_class_{_case}", _torch.as_tensor(_per_class, dtype=_torch.float64))
