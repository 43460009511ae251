# Ranks 1 and 2 are "stuck" (here: sleeping) while rank 0 checks in with a
# monitored barrier — a gloo-only collective that names the missing ranks.
import datetime
import time

import torch.distributed as dist

if rank == 0:
    try:
        dist.monitored_barrier(timeout=datetime.timedelta(seconds=1),
                               wait_all_ranks=params["wait_all_ranks"])
        report("passed", True)
    except RuntimeError as e:
        report("error_message", str(e))
        report("names_rank_1", "1" in str(e).split("failed")[0])
        report("names_rank_2", "2" in str(e).split("failed")[0])
else:
    time.sleep(1.5)  # arrive too late
