# The hooked gradients, raw (the app compares them with the reference solution's, bit for
# bit), and DDP's gradients for the same model and batch, compared here.
import torch as _torch
from torch import nn as _nn
from torch.nn.parallel import DistributedDataParallel as _DDP


def _model():
    # Weights and inputs are small multiples of 1/4, so every gradient is exact in float32
    # and the sum over ranks does not depend on the order the ranks' values are added in:
    # the only way to differ from DDP is to compute something else.
    m = _nn.Sequential(_nn.Linear(5, 8), _nn.ReLU(), _nn.Linear(8, 2))
    g = _torch.Generator().manual_seed(3)
    with _torch.no_grad():
        for p in m.parameters():
            p.copy_(_torch.randint(-4, 5, p.shape, generator=g).float() / 4)
    return m


_g = _torch.Generator().manual_seed(50 + rank)
_x = _torch.randint(-3, 4, (6, 5), generator=_g).float()

_mine = _model()
attach_averaging_hooks(_mine)
_mine(_x).sum().backward()

_ref = _model()
_ddp = _DDP(_ref)
_ddp(_x).sum().backward()

_pairs = [(p.grad, q.grad) for p, q in zip(_mine.parameters(), _ref.parameters())]
report("grads", [a if a is not None else "no gradient" for a, _ in _pairs])
report("bitwise_equal_ddp", all(a is not None and _torch.equal(a, b) for a, b in _pairs))
report("max_abs_diff", max(float((a - b).abs().max()) if a is not None else float("inf")
                           for a, b in _pairs))
