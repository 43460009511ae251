# Checks: two forward/backward passes with different data on every rank. The outputs and the
# gradient shards are compared with the reference solution; the tensors the object and the
# module still hold afterwards are measured. The engine counts the collectives.
import copy as _copy
import math as _math

import torch as _torch
from torch import nn as _nn

_torch.manual_seed(0)  # the same module on every rank; 75 parameters, not a multiple of 2 or 4
_net = _nn.Sequential(_nn.Linear(5, 8), _nn.Tanh(), _nn.Linear(8, 3))
_plain = _copy.deepcopy(_net)
_fs = FlatParamModule(_net)


def _data(r, it):
    return _torch.randn(4, 5, generator=_torch.Generator().manual_seed(10 * it + r))


def _ddp_grad_shard(it):
    # What DDP would give: every rank's gradient averaged, flattened, padded, sliced.
    grads = []
    for r in range(world_size):
        _plain.zero_grad()
        _plain(_data(r, it)).pow(2).mean().backward()
        grads.append(_torch.cat([p.grad.flatten() for p in _plain.parameters()]))
    g = sum(grads) / world_size
    size = _math.ceil(g.numel() / world_size)
    g = _torch.cat([g, g.new_zeros(size * world_size - g.numel())])
    return g[rank * size:(rank + 1) * size]


for _it in (1, 2):
    _out = _fs.forward(_data(rank, _it))
    report(f"output_{_it}", _out.detach())
    _out.pow(2).mean().backward()
    _g = _fs.reduce_grad()
    report(f"grad_shard_{_it}", _g)
    report(f"grad_shard_{_it}_ok", bool(_torch.allclose(_g, _ddp_grad_shard(_it), atol=1e-6)))
del _out


def _largest_held(*roots):
    # The largest tensor storage reachable from the wrapper and the module (elements).
    seen, best, todo = set(), 0, list(roots)
    while todo:
        v = todo.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if isinstance(v, _torch.Tensor):
            st = v.untyped_storage()
            best = max(best, st.nbytes() // v.element_size())
        elif isinstance(v, (list, tuple, set)):
            todo.extend(v)
        elif isinstance(v, dict):
            todo.extend(v.values())
        elif isinstance(v, _nn.Module) or v is _fs:
            todo.extend(vars(v).values())
    return best


report("largest_held_numel", _largest_held(_fs, _net))
