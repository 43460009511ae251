# FSDP2 on two gloo ranks: four blocks of distinct sizes, each its own unit, plus the root.
# We record, in issue order, each all-gather and reduce-scatter (named by its unit's size)
# and, in forward, the start of each block's computation; with or without explicit
# prefetch targets set on the units.
import torch
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.utils._python_dispatch import TorchDispatchMode

torch.manual_seed(0)
sizes = [(8, 16), (16, 12), (12, 10), (10, 6)]
model = nn.Sequential(*[nn.Linear(a, b) for a, b in sizes], nn.Linear(6, 2))
blocks = list(model)[:4]
unit_of_size = {b.weight.numel() + b.bias.numel(): f"L{i}" for i, b in enumerate(blocks)}
for block in blocks:
    fully_shard(block)
fully_shard(model)                                     # the root owns the head

fwd, bwd = params["forward_prefetch"], params["backward_prefetch"]
if fwd > 0:
    for i, block in enumerate(blocks):
        block.set_modules_to_forward_prefetch(blocks[i + 1: i + 1 + fwd])
if bwd > 0:
    for i, block in enumerate(blocks):
        block.set_modules_to_backward_prefetch(list(reversed(blocks[max(0, i - bwd): i])))

events = []
for i, block in enumerate(blocks):
    block.register_forward_pre_hook(lambda mod, args, i=i: events.append(f"compute L{i}"))


class Collectives(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func.overloadpacket)
        if name == "c10d._allgather_base_" and args[0].numel() in unit_of_size:
            events.append(f"gather {unit_of_size[args[0].numel()]}")
        elif name == "c10d._reduce_scatter_base_" and args[1].numel() in unit_of_size:
            events.append(f"reduce {unit_of_size[args[1].numel()]}")
        return func(*args, **(kwargs or {}))


with Collectives():
    out = model(torch.randn(4, 8))
    forward_events = events[:]
    events.clear()
    out.sum().backward()
    backward_events = events[:]


def gathered_ahead(order):
    """Most units gathered but not yet reduced at any point of backward."""
    live, most = set(), 0
    for e in order:
        kind, unit = e.split()
        (live.add if kind == "gather" else live.discard)(unit)
        most = max(most, len(live))
    return most


report("forward_order", forward_events)
report("backward_order", backward_events)
report("most_units_gathered_in_backward", gathered_ahead(backward_events))
