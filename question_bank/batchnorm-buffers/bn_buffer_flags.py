# A module keeps a per-rank value (its rank id) next to its layer. What does
# rank 1 hold after DDP wraps the module, and after one training forward?
import warnings

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

setup = params["setup"]


class WithLocalValue(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(1, 1)
        if setup == "plain_attribute":
            self.local_id = torch.tensor(float(rank))  # not a buffer: DDP never sees it
        else:
            # persistent=False only keeps the buffer out of state_dict()
            self.register_buffer("local_id", torch.tensor(float(rank)),
                                 persistent=setup != "non_persistent")

    def forward(self, x):
        return self.layer(x)


torch.manual_seed(0)
module = WithLocalValue()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    if setup == "broadcast_buffers_false":
        ddp = DDP(module, broadcast_buffers=False)
    elif setup == "forward_sync_buffers_false":
        ddp = DDP(module, forward_sync_buffers=False)
    else:
        ddp = DDP(module)
report("future_warning", any(w.category is FutureWarning for w in caught))
report("local_id_after_wrap", module.local_id.item())
ddp(torch.ones(1, 1)).sum().backward()
report("local_id_after_step", module.local_id.item())
