# Checks: two evaluation rounds with a different number of samples on every rank (one rank of
# four has none), against the accuracies of all ranks' samples pooled on one process. The
# engine counts the all-reduces.
import torch as _torch

_C = 3
_SIZES = {1: [5, 2, 7, 0], 2: [3, 8, 0, 4]}


def _data(r, case):
    n = _SIZES[case][r % 4]
    g = _torch.Generator().manual_seed(10 * case + r)
    return _torch.randn(n, _C, generator=g), (_torch.arange(n) + r) % _C


for _case in (1, 2):
    _overall, _per_class = global_accuracy(*_data(rank, _case), _C)
    report(f"overall_{_case}", _torch.as_tensor(_overall, dtype=_torch.float64))
    report(f"per_class_{_case}", _torch.as_tensor(_per_class, dtype=_torch.float64))
    _lg, _lb = map(_torch.cat, zip(*[_data(r, _case) for r in range(world_size)]))
    _right = (_lg.argmax(dim=1) == _lb).double()
    _ref = [_right.mean()] + [_right[_lb == c].mean() for c in range(_C)]
    _got = [_torch.as_tensor(_overall).double()] + list(_torch.as_tensor(_per_class).double())
    report(f"accuracy_{_case}_ok", bool(_torch.allclose(_torch.stack(_got), _torch.stack(_ref))))
