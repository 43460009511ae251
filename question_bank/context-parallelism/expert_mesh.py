# Eight ranks in a 3-D mesh (dp=2, cp=2, tp=2), tensor parallel innermost. Experts are
# sharded over the data- and context-parallel ranks together: the flattened "dp_cp"
# dimension. Which ranks share each group?
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

mesh = init_device_mesh("cpu", (2, 2, 2), mesh_dim_names=("dp", "cp", "tp"))
ep = mesh["dp", "cp"]._flatten("dp_cp")
report("tp_group", dist.get_process_group_ranks(mesh.get_group("tp")))
report("cp_group", dist.get_process_group_ranks(mesh.get_group("cp")))
report("dp_group", dist.get_process_group_ranks(mesh.get_group("dp")))
report("ep_group", dist.get_process_group_ranks(ep.get_group()))
