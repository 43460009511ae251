# Logging the mean training loss across ranks: rank 0's loss is 1, rank 1's 3.
# Which spelling leaves the mean (2) on every rank, on the CPU test backend?
import torch
import torch.distributed as dist

dtype = torch.float32 if params["dtype"] == "float" else torch.int64
loss = torch.tensor([1 + 2 * rank], dtype=dtype)
method = params["method"]
if method == "sum_then_divide":
    dist.all_reduce(loss, op=dist.ReduceOp.SUM)
    logged = loss / world_size  # the spelling every backend and version accepts
elif method == "avg":
    dist.all_reduce(loss, op=dist.ReduceOp.AVG)
    logged = loss
elif method == "default_op":
    dist.all_reduce(loss)  # the default op is SUM
    logged = loss
elif method == "reduce_to_rank0":
    dist.reduce(loss, dst=0)  # only the destination is promised the sum
    logged = loss / world_size
else:  # "rank0_local": no collective; DDP averaged the gradients, not the loss
    logged = loss
report("logged_loss", logged.item())
