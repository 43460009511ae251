# Three ranks all-reduce a vector of per-layer gradient norms every step, on a group with a
# 2-second timeout and the flight recorder on. Rank 2's model has four more layers with a
# gradient than the others' (it unfroze them early), so from step 2 its vector is longer.
# Afterwards every rank dumps its recorder, stack traces included.
import datetime
import os
import pickle

os.environ["TORCH_FR_BUFFER_SIZE"] = "64"  # read when a process group is created

import torch
import torch._C._distributed_c10d as c10d
import torch.distributed as dist

group = dist.new_group(timeout=datetime.timedelta(seconds=2))


def layers_with_gradients(step):
    return 12 if rank == 2 and step >= 2 else 8


finished = 0
for step in range(3):
    norms = torch.ones(layers_with_gradients(step))
    try:
        dist.all_reduce(norms, group=group)
        finished += 1
    except RuntimeError:
        report("failed_at_step", step)
report("steps_finished", finished)

dump = pickle.loads(c10d._dump_fr_trace(True, True, False))
mine = {"entries": [e for e in dump["entries"] if e["process_group"][0] == group.group_name]}
artifact("dump", "flight_recorder", mine)
report("last_seq", mine["entries"][-1]["collective_seq_id"])
report("last_sizes", mine["entries"][-1]["input_sizes"])
dist.barrier()  # on the harness's group, once every rank has dumped
