# Checks: every rank holds three sharded gradient tensors of its own (from its secret seed: no
# other rank can compute them) and two replicated ones (the same on every rank). Once with
# max_norm 1 (clips), once with max_norm 1000 (must not change anything). The raw norm and
# gradients are compared, in the app, with the reference solution's on the same data; the
# driver counts the all-reduces.
import torch as _torch


def _flat(ts):
    return _torch.cat([t.flatten() for t in ts])


for _case, _max in ((1, 1.0), (2, 1000.0)):
    _own = _torch.Generator().manual_seed(rank_seed + _case)
    _mine_s = [_torch.randn(4, 6, generator=_own) for _ in range(3)]
    _shared = _torch.Generator().manual_seed(shared_seed + _case)
    _mine_r = [_torch.randn(6, generator=_shared) for _ in range(2)]
    _norm = clip_grad_norm_sharded(_mine_s, _mine_r, _max)
    report(f"norm_{_case}", _torch.as_tensor(_norm, dtype=_torch.float32))
    report(f"sharded_{_case}", _flat(_mine_s))
    report(f"replicated_{_case}", _flat(_mine_r))
