# A backbone of `frozen` Linear(16, 16) layers is frozen (requires_grad=False) BEFORE the model
# is wrapped in DDP; a Linear(16, head) head stays trainable. A comm hook counts the gradient
# elements DDP reduces per backward.
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

torch.manual_seed(0)
backbone = nn.Sequential(*[nn.Linear(16, 16) for _ in range(params["frozen"])])
for p in backbone.parameters():
    p.requires_grad_(False)
model = nn.Sequential(backbone, nn.Linear(16, params["head"]))
ddp = DDP(model)
elements = [0]


def counting_hook(state, bucket):
    elements[0] += bucket.buffer().numel()
    return default_hooks.allreduce_hook(state, bucket)


ddp.register_comm_hook(None, counting_hook)
for _ in range(2):
    elements[0] = 0
    ddp(torch.ones(1, 16)).sum().backward()
report("elements_reduced", elements[0])
report("trainable_elements", sum(p.numel() for p in model.parameters() if p.requires_grad))
