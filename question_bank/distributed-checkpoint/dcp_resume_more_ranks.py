# Save on 2 ranks, resume on 4. One run has a fixed world size, so the "old
# job" is ranks 0 and 1 alone: a 2-rank FSDP2 model on its own process group
# (a row of a 2 x 2 mesh) that saves with dcp.save(process_group=...). Then all
# four ranks build a fresh 4-rank FSDP2 model and load the checkpoint.
import os

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard


def make_model(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 6), nn.Linear(6, 2))


rows = init_device_mesh("cpu", (2, 2), mesh_dim_names=("job", "dp"))  # rows {0, 1} and {2, 3}
saved = None
if rank < 2:
    old = make_model(seed=0)
    fully_shard(old, mesh=rows["dp"])                      # sharded over ranks 0 and 1 only
    report("old_local_rows", old[0].weight.to_local().shape[0])
    dcp.save({"model": get_model_state_dict(old)}, checkpoint_id="/tmp/ckpt",
             process_group=rows.get_group("dp"))
    saved = old[0].weight.full_tensor()
dist.barrier()
report("files", sorted(os.listdir("/tmp/ckpt")))

mesh4 = init_device_mesh("cpu", (world_size,))
new = make_model(seed=1)                                   # different weights until it loads
fully_shard(new, mesh=mesh4)
report("new_local_rows", new[0].weight.to_local().shape[0])
before = new[0].weight.full_tensor()
state = {"model": get_model_state_dict(new)}
dcp.load(state, checkpoint_id="/tmp/ckpt")
set_model_state_dict(new, state["model"])
loaded = new[0].weight.full_tensor()
if saved is not None:  # ranks 0 and 1 still hold what they saved
    report("differed_before_load", not torch.equal(before, saved))
    report("loaded_equals_saved", torch.equal(loaded, saved))
