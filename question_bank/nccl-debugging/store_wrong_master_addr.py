# Rank 0 hosts the rendezvous store on 127.0.0.1:29512 (what init does for
# MASTER_ADDR:MASTER_PORT). Rank 1 was given a wrong endpoint: either a port
# nothing listens on (as a firewalled or stale port behaves) or an address
# with no route to it. What does each side see, and when?
import datetime
import time

import torch.distributed as dist

if params["fault"] == "wrong_port":
    wrong = ("127.0.0.1", 29513)
else:  # "unroutable_addr": this sandbox has no route beyond loopback
    wrong = ("10.1.4.17", 29512)
addr, port = ("127.0.0.1", 29512) if rank == 0 else wrong
t0 = time.perf_counter()
try:
    dist.TCPStore(addr, port, world_size, rank == 0,
                  timeout=datetime.timedelta(seconds=2), wait_for_workers=True)
    report("init_returned", True)
except Exception as e:
    report("error_type", type(e).__name__)
    report("message", str(e))
    report("names_wrong_endpoint", f"{wrong[0]}, {wrong[1]}" in str(e))
    report("counts_clients", "1/2 clients joined" in str(e))
report("waited_at_least_timeout", time.perf_counter() - t0 >= 1.9)
dist.barrier()
