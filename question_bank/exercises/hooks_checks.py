# Checks: one backward of the same model (from the seed every rank shares) on this rank's own
# batch (from its secret seed), with the learner's hooks; the gradients are compared, in the
# app, bit for bit with what DDP gives on the same data in the reference run. Weights and inputs
# are small multiples of 1/4, so every gradient is exact in float32 and the sum over ranks does
# not depend on the order the ranks' values are added in: the only way to differ from DDP is to
# compute something else.
import torch as _torch
from torch import nn as _nn
from torch.nn.parallel import DistributedDataParallel as _DDP


def _model():
    m = _nn.Sequential(_nn.Linear(5, 8), _nn.ReLU(), _nn.Linear(8, 2))
    g = _torch.Generator().manual_seed(shared_seed)
    with _torch.no_grad():
        for p in m.parameters():
            p.copy_(_torch.randint(-4, 5, p.shape, generator=g).float() / 4)
    return m


_x = _torch.randint(-3, 4, (6, 5), generator=_torch.Generator().manual_seed(rank_seed)).float()

_mine = _model()
attach_averaging_hooks(_mine)
_mine(_x).sum().backward()
report("grads", [p.grad if p.grad is not None else "no gradient" for p in _mine.parameters()])

_ddp_model = _model()
_ddp = _DDP(_ddp_model)
_ddp(_x).sum().backward()
report("ddp_grads", [p.grad for p in _ddp_model.parameters()])
del _ddp
