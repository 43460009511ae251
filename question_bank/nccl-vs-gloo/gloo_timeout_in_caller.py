# Rank 0 all-reduces on a group whose timeout is short; rank 1 never calls it
# (it is busy elsewhere a little longer than the timeout). What does rank 0
# see, when, and can it carry on?
import datetime
import time

import torch
import torch.distributed as dist

limit = params["group_timeout_s"]
group = dist.new_group(timeout=datetime.timedelta(seconds=limit))
if rank == 0:
    t0 = time.perf_counter()
    try:
        dist.all_reduce(torch.ones(4), group=group)
        report("completed", True)
    except Exception as e:  # we want to see exactly what is raised
        waited = time.perf_counter() - t0
        report("exception_type", type(e).__name__)
        report("is_runtime_error", isinstance(e, RuntimeError))
        report("says_timed_out", "Timed out" in str(e))
        # Raised in the calling thread after about the group's timeout.
        report("waited_about_the_timeout", 0.8 * limit <= waited <= limit + 1.0)
else:
    time.sleep(limit + 0.5)

# The process is alive and the default group still works.
t = torch.ones(1)
dist.all_reduce(t)
report("default_group_sum_after", t.item())
