# Three ranks; rank 1 is stuck elsewhere (here: asleep) while ranks 0 and 2
# issue a fourth all-reduce, which times out. Every rank then dumps its flight
# recorder: the per-process ring buffer of the collectives it issued.
import datetime
import json
import os
import time

os.environ["TORCH_FR_BUFFER_SIZE"] = "64"  # read when a process group is created

import torch
import torch._C._distributed_c10d as c10d
import torch.distributed as dist

group = dist.new_group(timeout=datetime.timedelta(seconds=1))
for _ in range(3):
    dist.all_reduce(torch.ones(8), group=group)  # three collectives on every rank
if rank == 1:
    time.sleep(1.5)  # never issues the fourth
else:
    try:
        dist.all_reduce(torch.ones(8), group=group)
    except RuntimeError as e:
        report("timed_out", True)
dump = json.loads(c10d._dump_fr_trace_json(True, False))
entries = [e for e in dump["entries"] if e["process_group"][0] == group.group_name]
report("last_two", [[e["collective_seq_id"], e["profiling_name"]] for e in entries[-2:]])
report("last_seq", entries[-1]["collective_seq_id"])
report("last_op", entries[-1]["profiling_name"])
report("group_sequence_number", group._get_sequence_number_for_group())
dist.barrier()  # on the harness's group, after everyone has dumped
