# Three ranks run the same loop of metric all-reduces on a group with a 2-second timeout and
# the flight recorder on. At the fourth step rank 1 takes a branch of its own and broadcasts
# instead. Afterwards every rank dumps its recorder, stack traces included.
import datetime
import os
import pickle

os.environ["TORCH_FR_BUFFER_SIZE"] = "64"  # read when a process group is created

import torch
import torch._C._distributed_c10d as c10d
import torch.distributed as dist

group = dist.new_group(timeout=datetime.timedelta(seconds=2))


def sync_metrics():
    dist.all_reduce(torch.ones(16), group=group)


def sync_config():
    dist.broadcast(torch.zeros(16), src=0, group=group)


for step in range(4):
    try:
        if rank == 1 and step == 3:
            sync_config()  # a branch only rank 1 takes
        else:
            sync_metrics()
    except RuntimeError:
        report("failed_at_step", step)

dump = pickle.loads(c10d._dump_fr_trace(True, True, False))
mine = {"entries": [e for e in dump["entries"] if e["process_group"][0] == group.group_name]}
artifact("dump", "flight_recorder", mine)
last = mine["entries"][-1]
report("last_seq", last["collective_seq_id"])
report("last_op", last["profiling_name"])
report("last_line", [f["line"] for f in last["frames"] if f["filename"] == "snippet.py"][0])
dist.barrier()  # on the harness's group, once every rank has dumped
