# A DDP step under CPU autocast. A pass-through comm hook records the dtype of
# the flat bucket DDP hands to the all-reduce.
import torch
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

bucket_dtypes = []


def recording_allreduce(state, bucket):
    bucket_dtypes.append(str(bucket.buffer().dtype))
    return default_hooks.allreduce_hook(state, bucket)  # the same averaging DDP does


torch.manual_seed(0)
model = nn.Linear(4, 2)
ddp = DDP(model)
ddp.register_comm_hook(None, recording_allreduce)
dtype = getattr(torch, params["autocast_dtype"])
x = torch.full((3, 4), float(rank + 1))
with torch.autocast("cpu", dtype=dtype):
    out = ddp(x)
    loss = out.float().pow(2).mean()
loss.backward()
report("output_dtype", str(out.dtype))
report("param_dtype", str(model.weight.dtype))
report("grad_dtype", str(model.weight.grad.dtype))
report("bucket_dtypes", bucket_dtypes)
