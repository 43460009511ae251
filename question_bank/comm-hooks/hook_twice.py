# Registering a second comm hook on the same DDP model, or a hook after a built-in hook.
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

model = nn.Linear(2, 1)
ddp = DDP(model)
ddp.register_comm_hook(None, default_hooks.allreduce_hook)
try:
    ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    report("second_registration", "accepted")
except RuntimeError as err:
    report("second_registration", "RuntimeError")
    report("message_says_once", "only be called once" in str(err))
ddp(torch.ones(1, 2)).sum().backward()       # the first hook still reduces
report("grad_bias", model.bias.grad.item())
