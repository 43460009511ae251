# A launch script says WORLD_SIZE=3 but only two processes start. With
# init_method "env://", rank 0 hosts a TCPStore at MASTER_ADDR:MASTER_PORT
# sized for WORLD_SIZE clients and waits for all of them before init returns.
# (Each run has its own network namespace, so a fixed port is free.)
import datetime
import time

import torch.distributed as dist

expected_world_size = world_size + 1  # one process was never launched
t0 = time.perf_counter()
try:
    store = dist.TCPStore("127.0.0.1", 29511, expected_world_size, rank == 0,
                          timeout=datetime.timedelta(seconds=2), wait_for_workers=True)
    if rank != 0:
        store.wait(["init-done"], datetime.timedelta(seconds=4))  # what a client waits on
    report("init_returned", True)
except Exception as e:  # we want to see what each rank is told
    report("error_type", type(e).__name__)
    report("message", str(e))
    report("counts_clients", "2/3 clients joined" in str(e))
waited = time.perf_counter() - t0
report("waited_at_least_timeout", waited >= 1.9)
dist.barrier()  # on the harness's own group: both ranks are still alive here
