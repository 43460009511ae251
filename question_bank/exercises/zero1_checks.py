# Checks: three steps on a 128 x 128 weight against one process running plain data-parallel
# SGD with momentum (torch.optim.SGD) on every rank's gradient averaged; the size of the state
# the optimizer keeps; the collectives and bytes are counted by the engine.
import torch as _torch

_D = 128
_STEPS = 3


def _data(r, step):
    return _torch.randn(8, _D, generator=_torch.Generator().manual_seed(100 * r + step))


def _grad(flat, x):
    w = flat.detach().view(_D, _D).clone().requires_grad_()
    (x @ w.t()).tanh().pow(2).mean().backward()
    return w.grad.flatten()


def _held_numels(obj, skip_ptr):
    # Every tensor storage the optimizer object keeps, except the parameter's own.
    seen, sizes, todo = set(), [], list(vars(obj).values())
    while todo:
        v = todo.pop()
        if isinstance(v, _torch.Tensor):
            st = v.untyped_storage()
            if st.data_ptr() not in seen and st.data_ptr() != skip_ptr:
                seen.add(st.data_ptr())
                sizes.append(st.nbytes() // v.element_size())
        elif isinstance(v, (list, tuple)):
            todo.extend(v)
        elif isinstance(v, dict):
            todo.extend(v.values())
    return sizes


_init = _torch.randn(_D * _D, generator=_torch.Generator().manual_seed(0)) * 0.05
_flat = _init.clone()
_opt = ShardedMomentumSGD(_flat, lr=0.1, momentum=0.9)
for _s in range(_STEPS):
    _opt.step(_grad(_flat, _data(rank, _s)))

_ref = _torch.nn.Parameter(_init.clone())
_ref_opt = _torch.optim.SGD([_ref], lr=0.1, momentum=0.9)
for _s in range(_STEPS):
    _ref.grad = sum(_grad(_ref, _data(r, _s)) for r in range(world_size)) / world_size
    _ref_opt.step()

# 16 fixed random projections of the 16,384 weights: any wrong slice moves them.
_P = _torch.randn(16, _D * _D, generator=_torch.Generator().manual_seed(7)) / _D
report("weights_digest", _P @ _flat)
report("weights_head", _flat[:4])
report("weights_ok", bool(_torch.allclose(_flat, _ref.detach(), atol=1e-6)))
report("largest_state_numel", max(_held_numels(_opt, _flat.untyped_storage().data_ptr()), default=0))
