# Clipping when state is sharded. ZeRO-1 (ZeroRedundancyOptimizer) shards only
# optimizer state; FSDP2 (fully_shard) shards the gradients too. A weight of
# shape (2, 1) whose gradient is [[3], [4]] on every rank: FSDP keeps row 0 on
# rank 0 and row 1 on rank 1.
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

coeff = torch.tensor([3.0, 4.0])

# ZeRO-1 under DDP.
torch.manual_seed(0)
model = nn.Linear(1, 2, bias=False)
ddp = DDP(model)
opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.SGD, lr=0.1)
(ddp(torch.ones(1, 1)) * coeff).sum().backward()
report("zero_grad_numel", model.weight.grad.numel())
zero_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
report("zero_total_norm", round(zero_norm.item(), 4))

# FSDP2 on CPU over gloo.
torch.manual_seed(0)
sharded = nn.Linear(1, 2, bias=False)
fully_shard(sharded)
(sharded(torch.ones(1, 1)) * coeff).sum().backward()
local = sharded.weight.grad.to_local()
report("fsdp_grad_is_dtensor", type(sharded.weight.grad).__name__ == "DTensor")
report("fsdp_local_grad_numel", local.numel())
report("fsdp_local_norm", round(local.norm().item(), 4))
# The global norm by hand: all-reduce the squared local norms, then sqrt.
squared = local.pow(2).sum()
dist.all_reduce(squared)
report("global_norm_by_hand", round(squared.sqrt().item(), 4))
fsdp_norm = torch.nn.utils.clip_grad_norm_(sharded.parameters(), max_norm=1.0)
report("fsdp_total_norm", round(fsdp_norm.full_tensor().item(), 4))
