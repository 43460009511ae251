# Rank 0's local gradient is 1/3 in every entry, rank 1's is 0. Which value
# ends up in .grad when a compressing comm hook is registered on gloo?
import torch
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP


def bf16_renamed(state, bucket):
    # The body of default_hooks.bf16_compress_hook under another name: DDP's
    # registration check matches the hook by its name and asks the torch build.
    return default_hooks._compress_hook(torch.bfloat16, state, bucket)


hooks = {
    "none": None,
    "fp16": default_hooks.fp16_compress_hook,
    "bf16": default_hooks.bf16_compress_hook,
    "bf16_renamed": bf16_renamed,
}
torch.manual_seed(0)
model = nn.Linear(4, 1, bias=False)
ddp = DDP(model)
hook = hooks[params["hook"]]
if hook is not None:
    try:
        ddp.register_comm_hook(None, hook)
        report("registered", True)
    except TypeError as exc:
        report("registered", False)
        report("register_error", str(exc))
        raise
x = torch.full((1, 4), 1 / 3 if rank == 0 else 0.0)
ddp(x).sum().backward()  # d(sum)/d(weight) = x
report("grad", model.weight.grad[0, 0].item())
report("grad_dtype", str(model.weight.grad.dtype))
report("exact_average", 1 / 6)
