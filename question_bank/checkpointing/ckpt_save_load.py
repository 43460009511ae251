# Rank 0 saves a checkpoint into the run's shared folder; after a barrier every
# rank loads it into a plain, unwrapped nn.Linear (as an inference script would).
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
ddp = DDP(nn.Linear(2, 1))
state = ddp.state_dict() if params.get("save_from", "module") == "wrapper" else ddp.module.state_dict()
if rank == 0:
    torch.save(state, "ckpt.pt")
save_end = torch.tensor(time.perf_counter(), dtype=torch.float64)
dist.barrier()  # nobody reads before rank 0 has finished writing
barrier_exit = time.perf_counter()
dist.broadcast(save_end, src=0)  # CLOCK_MONOTONIC: one time axis for all ranks
report("left_barrier_after_save", barrier_exit >= save_end.item())
report("saved_keys", list(state.keys()))
report("checkpoint_files", sorted(f for f in os.listdir(".") if f.endswith(".pt")))

torch.manual_seed(100 + rank)  # a fresh layer with a different init on each rank
plain = nn.Linear(2, 1)
weights = [torch.zeros(2) for _ in range(world_size)]
dist.all_gather(weights, plain.weight.detach().flatten())
report("replicas_equal_before_load", all(torch.equal(weights[0], w) for w in weights))
try:
    plain.load_state_dict(torch.load("ckpt.pt", map_location="cpu"))
    report("load", "ok")
except RuntimeError as exc:
    report("load", "RuntimeError")
    report("load_error_mentions_module_prefix", 'Unexpected key(s) in state_dict: "module.weight"' in str(exc))
report("matches_rank0_model", torch.equal(plain.weight, ddp.module.weight))
