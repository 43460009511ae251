# Logging the mean loss across ranks with a one-liner that works on NCCL.
import torch
import torch.distributed as dist

loss = torch.tensor([1.0 + 2.0 * rank])  # rank 0: 1.0, rank 1: 3.0
if params["op"] == "AVG":
    dist.all_reduce(loss, op=dist.ReduceOp.AVG)
else:
    dist.all_reduce(loss, op=dist.ReduceOp.SUM)
    loss /= world_size  # the spelling every backend and version accepts
report("mean_loss", loss.item())
