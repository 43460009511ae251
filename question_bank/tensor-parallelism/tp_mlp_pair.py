# A Megatron MLP, up (8 -> 32), GELU, down (32 -> 8), split over every rank with
# parallelize_module on a 1-D CPU mesh. CommDebugMode counts the collectives that
# DTensor issues (functional collectives, which the harness's timeline does not show).
import copy

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.debug import CommDebugMode
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(8, 32)
        self.down = nn.Linear(32, 8)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))


def counts(mode):
    return {str(op).split(".")[-1]: n for op, n in mode.get_comm_counts().items()}


def local(t):
    return t.to_local() if hasattr(t, "to_local") else t


torch.manual_seed(0)
ref = MLP()                                 # rank 0's initialisation, built the same on every rank
if params.get("seed_per_rank", False):
    torch.manual_seed(rank)                 # each rank initialises its own, different, full model
    model = MLP()
else:
    model = copy.deepcopy(ref)
mesh = init_device_mesh("cpu", (world_size,))
col_row = params.get("order", "col_row") == "col_row"
if col_row:   # Megatron's order: column-parallel first, row-parallel second
    plan = {"up": ColwiseParallel(), "down": RowwiseParallel()}
else:         # the reverse, for comparison: the first layer's input must arrive split by features
    plan = {"up": RowwiseParallel(), "down": ColwiseParallel()}
src = params.get("src_data_rank", 0)
# 0 (the default): rank 0's full weights are scattered (shards) and broadcast (replicas) to the
# other ranks; None: every rank keeps its own slice of whatever it initialised
parallelize_module(model, mesh, plan, src_data_rank=None if src == "none" else src)

hidden = {}
model.up.register_forward_hook(lambda mod, args, out: hidden.update(shape=list(local(out).shape)))

torch.manual_seed(1)
x = torch.randn(4, 8)                       # every TP rank sees the same batch
x_in = x if col_row else x.chunk(world_size, dim=-1)[rank]
x_in = x_in.clone().requires_grad_(params.get("input_requires_grad", True))
with CommDebugMode() as fwd:
    out = model(x_in)
with CommDebugMode() as bwd:
    out.sum().backward()

want = ref(x)
want.sum().backward()
report("forward_collectives", counts(fwd))
report("backward_collectives", counts(bwd))
report("hidden_local_shape", hidden["shape"])
report("output_local_shape", list(local(out).shape))
expected = want if col_row else want.chunk(world_size, -1)[rank]   # reversed: each rank holds a slice
report("output_matches_unsplit", torch.allclose(local(out), expected, atol=1e-6))
for name in ("up", "down"):
    layer = getattr(model, name)
    report(f"{name}_weight_local_shape", list(layer.weight.to_local().shape))
    report(f"{name}_weight_placement", str(layer.weight.placements[0]))
    report(f"{name}_bias_local_shape", list(layer.bias.to_local().shape))
    report(f"{name}_bias_placement", str(layer.bias.placements[0]))
if col_row:
    report("down_bias_is_rank0_init", torch.allclose(model.down.bias.to_local(), ref.down.bias))
    # each rank's weight gradient is the gradient of its own rows, with nothing exchanged
    own_rows = ref.up.weight.grad.chunk(world_size, dim=0)[rank]
    report("up_weight_grad_local_shape", list(model.up.weight.grad.to_local().shape))
    report("up_weight_grad_is_own_rows", torch.allclose(model.up.weight.grad.to_local(), own_rows, atol=1e-6))
