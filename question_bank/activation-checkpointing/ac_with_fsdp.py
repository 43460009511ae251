# Activation checkpointing inside FSDP2 units, on two gloo ranks: does the
# recomputation in backward need extra all-gathers?
import copy

import torch
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor.debug import CommDebugMode
from torch.utils.checkpoint import checkpoint

use_ac = params.get("checkpoint", True)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Sequential(nn.Linear(16, 16), nn.ReLU()) for _ in range(3))

    def forward(self, h):
        for layer in self.layers:
            h = checkpoint(layer, h, use_reentrant=False) if use_ac else layer(h)
        return h


torch.manual_seed(0)
model = Net()
plain = copy.deepcopy(model)
for layer in model.layers:
    fully_shard(layer)                       # one unit per layer, resharded after forward
fully_shard(model)

starts = [0]
for layer in model.layers:
    layer.register_forward_pre_hook(lambda m, a: starts.__setitem__(0, starts[0] + 1))


def all_gathers(mode):
    return {str(k): v for k, v in mode.get_comm_counts().items()}.get("c10d._allgather_base_", 0)


x = torch.randn(4, 16)
# One CommDebugMode around both passes: its module tracker must see the forward
# to follow the recomputation in backward.
comm = CommDebugMode()
with comm:
    out = model(x)
    forward_all_gathers = all_gathers(comm)
    out.sum().backward()
plain(x).sum().backward()                    # the same batch on every rank, so no averaging differs

report("forward_all_gathers", forward_all_gathers)
report("backward_all_gathers", all_gathers(comm) - forward_all_gathers)
report("layer_forward_starts", starts[0])
pairs = zip(model.parameters(), plain.parameters(), strict=True)
report("grads_match_unsharded", all(
    torch.allclose(p.grad.full_tensor(), q.grad, atol=1e-6) for p, q in pairs))
