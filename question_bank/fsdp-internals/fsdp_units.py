# FSDP2 on two gloo ranks: three blocks of distinct sizes plus a head that the
# root unit owns. How many all-gathers and reduce-scatters does each phase
# issue, and how many parameter elements are unsharded (gathered) at a time?
import torch
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.debug import CommDebugMode
from torch.utils._python_dispatch import TorchDispatchMode

torch.manual_seed(0)
# 144 + 204 + 130 + 22 = 500 parameter elements; the sizes tell the units apart.
model = nn.Sequential(nn.Linear(8, 16), nn.Linear(16, 12), nn.Linear(12, 10), nn.Linear(10, 2))
unit_of_size = {144: "layer0", 204: "layer1", 130: "layer2", 22: "head", 500: "model"}

reshard = {"default": {}, "true": {"reshard_after_forward": True},
           "false": {"reshard_after_forward": False}}[params.get("reshard", "default")]
if params.get("wrap", "per_layer") == "per_layer":
    for block in list(model)[:3]:
        fully_shard(block, **reshard)       # one unit per block ...
fully_shard(model, **reshard)               # ... and the root unit, which owns what is left: the head


def unsharded_elems():
    # Between all-gather and reshard a unit's parameters are plain tensors; sharded, they are DTensors.
    return sum(p.numel() for p in model.parameters() if not isinstance(p, DTensor))


peak = [0]
for layer in model:
    layer.register_forward_pre_hook(lambda mod, args: peak.__setitem__(0, max(peak[0], unsharded_elems())))


class CollectiveOrder(TorchDispatchMode):
    """Records which unit each all-gather / reduce-scatter belongs to, in issue order."""

    def __init__(self):
        super().__init__()
        self.order = []
        self.gathered = 0  # parameter elements received whole from all-gathers


    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func.overloadpacket)
        if name == "c10d._allgather_base_":        # (output = the whole unit, input = this rank's shard)
            self.order.append("AG " + unit_of_size[args[0].numel()])
            self.gathered += args[0].numel()
        elif name == "c10d._reduce_scatter_base_":  # (output = this rank's shard, input = the whole unit)
            self.order.append("RS " + unit_of_size[args[1].numel()])
        return func(*args, **(kwargs or {}))


def counts(mode):
    c = {str(k): v for k, v in mode.get_comm_counts().items()}
    return c.get("c10d._allgather_base_", 0), c.get("c10d._reduce_scatter_base_", 0)


x = torch.randn(4, 8)
fwd, fwd_order = CommDebugMode(), CollectiveOrder()
with fwd, fwd_order:
    out = model(x)
report("unsharded_after_forward", unsharded_elems())
bwd, order = CommDebugMode(), CollectiveOrder()
with bwd, order:
    out.sum().backward()

report("fwd_all_gathers", counts(fwd)[0])
report("bwd_all_gathers", counts(bwd)[0])
report("reduce_scatters", counts(bwd)[1])
report("peak_unsharded_in_forward", peak[0])
report("backward_order", order.order)
report("elements_all_gathered", fwd_order.gathered + order.gathered)
report("unsharded_after_backward", unsharded_elems())
