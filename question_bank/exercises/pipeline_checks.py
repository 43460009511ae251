# Checks: every rank gets stage `rank` of a model of world_size stages, its weights drawn from
# this rank's own secret seed (no other rank knows them), and rank 0 the input batch. The last
# rank's output is compared, in the app, with the reference solution's on the same stages and
# input. Each call of a stage is marked, and the driver records how many collectives this rank
# had made by then: the reference's stage s computes micro-batch i + 1 only after handing
# micro-batch i on, and the marks must fall between the same collectives.
import torch as _torch
from torch import nn as _nn

_WIDTH = 6
_torch.manual_seed(rank_seed)
_body = _nn.Sequential(_nn.Linear(_WIDTH, _WIDTH), _nn.Tanh())
_own = _torch.Generator().manual_seed(rank_seed)


class _MarkedStage(_nn.Module):
    def __init__(self, body):
        super().__init__()
        self.body, self.calls = body, []

    def forward(self, x):
        mark_memory("stage_call")
        self.calls.append(int(x.shape[0]))
        return self.body(x)


def _run(rows, n_micro):
    x = _torch.randn(rows, _WIDTH, generator=_own)
    mine = x if rank == 0 else _torch.full_like(x, float("nan"))
    stage = _MarkedStage(_body)
    with _torch.no_grad():
        out = pipeline_forward(stage, mine, n_micro)
    return out, stage.calls


_out, _calls = _run(8, 4)
report("calls_rows", _calls)
if rank == world_size - 1:
    report("output", _out)
_out2, _calls2 = _run(6, 2)
report("calls_rows_second", _calls2)
if rank == world_size - 1:
    report("output_second", _out2)
