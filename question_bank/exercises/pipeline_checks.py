# Checks: every rank gets stage `rank` of a model of world_size stages, wrapped so that each
# call is appended to a log file the ranks share (the scratch folder). The output is compared
# with the unsplit model; the log shows how the micro-batches moved. Because a gloo send
# returns only once the receiver has posted its recv, a stage that hands each micro-batch on
# before computing the next cannot start micro-batch 2 before the next stage has started
# micro-batch 0: that order is causal, not a matter of timing.
import os as _os

import torch as _torch
import torch.distributed as _dist
from torch import nn as _nn

_WIDTH = 6
_LOG = "pipeline_calls.log"


def _body(s):
    _torch.manual_seed(100 + s)
    return _nn.Sequential(_nn.Linear(_WIDTH, _WIDTH), _nn.Tanh())


class _LoggedStage(_nn.Module):
    def __init__(self, s):
        super().__init__()
        self.s, self.calls, self.body = s, [], _body(s)

    def forward(self, x):
        fd = _os.open(_LOG, _os.O_WRONLY | _os.O_APPEND | _os.O_CREAT)
        _os.write(fd, f"{self.s} {len(self.calls)}\n".encode())
        _os.close(fd)
        self.calls.append(int(x.shape[0]))
        return self.body(x)


def _unsplit(x):
    for s in range(world_size):
        x = _body(s)(x)
    return x


def _run(rows, n_micro, seed):
    x = _torch.randn(rows, _WIDTH, generator=_torch.Generator().manual_seed(seed))
    mine = x if rank == 0 else _torch.full_like(x, float("nan"))
    stage = _LoggedStage(rank)
    with _torch.no_grad():
        out = pipeline_forward(stage, mine, n_micro)
        ref = _unsplit(x)
    return out, ref, stage.calls


if rank == 0:
    open(_LOG, "w").close()
_dist.barrier()
_out, _ref, _calls = _run(8, 4, 1)
_dist.barrier()
with open(_LOG) as _f:
    _order = [tuple(int(v) for v in line.split()) for line in _f if line.strip()]


def _before(a, b):
    return a in _order and b in _order and _order.index(a) < _order.index(b)


# Stage s + 1 started micro-batch 0 before stage s started micro-batch 2, for every s.
report("micro_batches_in_flight", all(_before((s + 1, 0), (s, 2)) for s in range(world_size - 1)))
report("calls_rows", _calls)
if rank == world_size - 1:
    report("output", _out)
    report("output_ok", _out is not None and bool(_torch.allclose(_out, _ref, atol=1e-6)))

_out2, _ref2, _calls2 = _run(6, 2, 2)
if rank == world_size - 1:
    report("output_second", _out2)
report("calls_rows_second", _calls2)
