# FSDP2 on four gloo ranks with different device meshes: which ranks share a
# shard group, what each rank holds, and which collectives one step issues.
import copy

import torch
import torch.distributed as dist
from torch import nn
from torch._C._distributed_c10d import ProcessGroup
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor.debug import CommDebugMode
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils._python_dispatch import TorchDispatchMode

layout = params.get("layout", "hsdp")
if layout in ("full_shard", "full_shard_reshard_to_2"):
    mesh = init_device_mesh("cpu", (4,), mesh_dim_names=("shard",))
elif layout == "replicate_only":
    mesh = init_device_mesh("cpu", (4, 1), mesh_dim_names=("replicate", "shard"))
elif layout == "names_swapped":  # the same 2 x 2 mesh, its dimension names written the other way round
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("shard", "replicate"))
else:
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("replicate", "shard"))

# Ranks that share this rank's group along each mesh dimension, by position and by name.
report("dim_groups", [dist.get_process_group_ranks(mesh.get_group(d)) for d in range(mesh.ndim)])
report("named_groups", {n: dist.get_process_group_ranks(mesh.get_group(n)) for n in mesh.mesh_dim_names})

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 8))
reference = copy.deepcopy(model)
# An int reshard_after_forward reshards, after forward, only to groups of that many ranks.
reshard = {"reshard_after_forward": 2} if layout == "full_shard_reshard_to_2" else {}
for block in model:
    fully_shard(block, mesh=mesh, **reshard)
fully_shard(model, mesh=mesh)

w = model[0].weight
report("placements", str(w.placements))
report("local_weight_shape", list(w.to_local().shape))
report("local_weight_elems", w.to_local().numel())


class GroupSizes(TorchDispatchMode):
    """For each collective FSDP issues, the size of the process group it runs on."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func.overloadpacket)
        if name in ("c10d._allgather_base_", "c10d._reduce_scatter_base_", "c10d.allreduce_"):
            group = args[2] if name != "c10d.allreduce_" else args[1]  # the ProcessGroup, boxed
            self.seen.append((name, ProcessGroup.unbox(group).size()))
        return func(*args, **(kwargs or {}))


def counts(mode):
    c = {str(k): v for k, v in mode.get_comm_counts().items()}
    return {op: c.get(f"c10d.{op}", 0) for op in ("_allgather_base_", "_reduce_scatter_base_", "allreduce_")}


g = torch.Generator().manual_seed(10 + rank)  # each rank its own batch
x = torch.randn(4, 8, generator=g)
fwd, bwd, fwd_sizes, bwd_sizes = CommDebugMode(), CommDebugMode(), GroupSizes(), GroupSizes()
with fwd, fwd_sizes:
    out = model(x)
with bwd, bwd_sizes:
    out.sum().backward()
report("forward_collectives", counts(fwd))
report("backward_collectives", counts(bwd))
report("forward_group_sizes", sorted({f"{n.split('.')[1]}:{s}" for n, s in fwd_sizes.seen}))
report("backward_group_sizes", sorted({f"{n.split('.')[1]}:{s}" for n, s in bwd_sizes.seen}))

# DDP over all four ranks on the same batches: the gradient every rank should end with.
ddp = DDP(reference)
ddp(x).sum().backward()
full_grad = w.grad.full_tensor()
matches = torch.allclose(full_grad, reference[0].weight.grad, atol=1e-6)
report("grad_matches_ddp_over_all_ranks", bool(matches))

# A second forward: does it gather again, or reuse anything from the first step?
again = CommDebugMode()
with again:
    model(x)
report("second_forward_collectives", counts(again))
