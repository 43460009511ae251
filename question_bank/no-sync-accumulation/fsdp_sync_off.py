# FSDP2 with gradient accumulation over `micro` micro-batches: set_requires_gradient_sync(False)
# for all but the last (sync_last), or left on for every one (every). `blocks` Linear blocks,
# each its own unit under a root that owns no parameters.
import torch
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor.debug import CommDebugMode

torch.manual_seed(0)
model = nn.Sequential(*[nn.Linear(8, 8) for _ in range(params["blocks"])])
for block in model:
    fully_shard(block)
fully_shard(model)
reduce_scatters = 0
for mb in range(params["micro"]):
    if params["sync"] == "sync_last":
        model.set_requires_gradient_sync(mb == params["micro"] - 1)
    with CommDebugMode() as comm:
        model(torch.randn(2, 8)).sum().backward()
    counts = {str(k): v for k, v in comm.get_comm_counts().items()}
    reduce_scatters += counts.get("c10d._reduce_scatter_base_", 0)
report("reduce_scatters", reduce_scatters)
