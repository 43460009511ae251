# How many bytes of gradient storage exist after backward: the .grad tensors plus DDP's
# bucket buffers (seen through a recording comm hook), counted once per storage.
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

h = params["hidden"]


def gradient_bytes(as_view):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(h, h), nn.Linear(h, h))
    ddp = DDP(model, gradient_as_bucket_view=as_view, bucket_cap_mb=1000)
    storages = {}

    def record(state, bucket):
        s = bucket.buffer().untyped_storage()
        storages[s.data_ptr()] = s.nbytes()
        return default_hooks.allreduce_hook(state, bucket)

    ddp.register_comm_hook(None, record)
    for _ in range(2):                                   # the second backward runs the rebuilt buckets
        storages.clear()
        ddp(torch.ones(1, h)).sum().backward()
    for p in model.parameters():
        s = p.grad.untyped_storage()
        storages[s.data_ptr()] = s.nbytes()
    return sum(storages.values()), sum(p.numel() for p in model.parameters())


copy_bytes, n = gradient_bytes(False)
view_bytes, _ = gradient_bytes(True)
report("parameters", n)
report("bytes_default", copy_bytes)
report("bytes_as_view", view_bytes)
report("saved_mib", round((copy_bytes - view_bytes) / 2 ** 20, 3))
report("copies_default", round(copy_bytes / (4 * n), 3))
report("copies_as_view", round(view_bytes / (4 * n), 3))
