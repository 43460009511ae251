# A module with a rank-local buffer (say, a per-rank counter). torch 2.13
# renames broadcast_buffers to forward_sync_buffers: do the two "False" flags
# mean the same thing?
import warnings

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class WithLocalBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(1, 1)
        self.register_buffer("local_id", torch.tensor(float(rank)))

    def forward(self, x):
        return self.layer(x)


torch.manual_seed(0)
module = WithLocalBuffer()
flag = params["flag"]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    if flag == "broadcast_buffers_false":
        ddp = DDP(module, broadcast_buffers=False)
    else:
        ddp = DDP(module, forward_sync_buffers=False)
report("future_warning", any(w.category is FutureWarning for w in caught))
report("local_id_after_wrap", module.local_id.item())
ddp(torch.ones(1, 1)).sum().backward()
report("local_id_after_step", module.local_id.item())
