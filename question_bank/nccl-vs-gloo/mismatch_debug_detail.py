# Two ranks call all_reduce on tensors of different sizes — a bug. How does
# the bug show up with and without TORCH_DISTRIBUTED_DEBUG=DETAIL?
import torch
import torch.distributed as dist

# The env var is read when the group is created; set the level from code and
# make a new group. (DETAIL wraps the group in a checker; do not put DDP on it
# here: in this build DETAIL makes the DDP constructor crash on gloo.)
dist.set_debug_level(getattr(dist.DebugLevel, params["debug"]))
group = dist.new_group()
t = torch.ones(3 if rank == 0 else 5)
try:
    dist.all_reduce(t, group=group)
    report("returned", True)
except RuntimeError as e:
    report("mentions_mismatch", "Detected mismatch between collectives" in str(e))
    report("mentions_both_shapes", "TensorShape=[3]" in str(e) and "TensorShape=[5]" in str(e))
