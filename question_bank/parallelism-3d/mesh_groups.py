# A 2 x 2 device mesh over 4 ranks, its dimensions named in the order params["order"]
# gives. Which global ranks end up in each rank's "tp" and "dp" groups?
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

names = ("dp", "tp") if params.get("order", "dp_tp") == "dp_tp" else ("tp", "dp")
mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=names)
report("mesh", mesh.mesh.tolist())
report("tp_group", dist.get_process_group_ranks(mesh["tp"].get_group()))
report("dp_group", dist.get_process_group_ranks(mesh["dp"].get_group()))
report("coordinate", mesh.get_coordinate())
# Nobody leaves before every rank has its groups: gloo finishes connecting a new group at
# different moments on the two ends of a pair, and a rank that exited at once could leave a
# peer still connecting to it ("Connection closed by peer" in connectFullMesh).
dist.barrier()
