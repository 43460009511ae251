# Checks: every rank holds three sharded gradient tensors of its own and two replicated ones
# (the same on every rank). One process puts the whole model together (every rank's shards,
# the replicated tensors once) and runs torch.nn.utils.clip_grad_norm_ on it; each rank's
# tensors are compared with their part of that. Once with max_norm 1 (clips), once with
# max_norm 1000 (must not change anything). The engine counts the all-reduces.
import torch as _torch


def _sharded(r, case):
    g = _torch.Generator().manual_seed(10 * case + r)
    return [_torch.randn(4, 6, generator=g) for _ in range(3)]


def _replicated(case):
    g = _torch.Generator().manual_seed(1000 + case)
    return [_torch.randn(6, generator=g) for _ in range(2)]


def _flat(ts):
    return _torch.cat([t.flatten() for t in ts])


for _case, _max in ((1, 1.0), (2, 1000.0)):
    _mine_s, _mine_r = _sharded(rank, _case), _replicated(_case)
    _norm = clip_grad_norm_sharded(_mine_s, _mine_r, _max)
    report(f"norm_{_case}", _torch.as_tensor(_norm, dtype=_torch.float32))
    report(f"sharded_{_case}", _flat(_mine_s))
    report(f"replicated_{_case}", _flat(_mine_r))
    _params = []
    for _t in [t for r in range(world_size) for t in _sharded(r, _case)] + _replicated(_case):
        _p = _torch.nn.Parameter(_torch.zeros_like(_t))
        _p.grad = _t
        _params.append(_p)
    _ref_norm = _torch.nn.utils.clip_grad_norm_(_params, _max)
    _k = 3 * rank
    _ok = (_torch.allclose(_torch.as_tensor(_norm), _ref_norm, atol=1e-5)
           and _torch.allclose(_flat(_mine_s), _flat(p.grad for p in _params[_k:_k + 3]), atol=1e-6)
           and _torch.allclose(_flat(_mine_r), _flat(p.grad for p in _params[-2:]), atol=1e-6))
    report(f"clip_{_case}_ok", bool(_ok))
