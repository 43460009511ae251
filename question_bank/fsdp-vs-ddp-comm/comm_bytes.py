# Bytes each rank sends per training step for the same model under DDP and
# under FSDP2, read from the kernel's counters of gloo's TCP sockets
# (TCP_INFO.tcpi_bytes_sent), in multiples of the model's float32 size.
import ctypes
import os
import socket
import struct

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor
from torch.nn.parallel import DistributedDataParallel as DDP

# Offsets in struct tcp_info (Linux 4.19+): bytes sent, minus bytes retransmitted.
TCPI_BYTES_SENT, TCPI_BYTES_RETRANS = 200, 208
libc = ctypes.CDLL(None, use_errno=True)


def bytes_sent(fd):
    buf = ctypes.create_string_buffer(232)
    size = ctypes.c_uint32(len(buf))
    if libc.getsockopt(fd, socket.IPPROTO_TCP, socket.TCP_INFO, buf, ctypes.byref(size)) != 0:
        return None
    if size.value < TCPI_BYTES_RETRANS + 8:
        return None
    sent, retrans = struct.unpack_from("QQ", buf.raw, TCPI_BYTES_SENT)
    return sent - retrans


def sent_so_far():
    total = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                total += bytes_sent(int(name)) or 0
        except OSError:
            pass
    return total


strategy = params.get("strategy", "fsdp")
torch.manual_seed(0)
model = nn.Sequential(*[nn.Linear(256, 256) for _ in range(4)])
model_bytes = 4 * sum(p.numel() for p in model.parameters())  # 1,052,672 bytes of float32
if strategy == "ddp":
    step_model = DDP(model)
else:
    reshard = strategy == "fsdp"                 # "fsdp_no_reshard": keep units gathered after forward
    for block in model:
        fully_shard(block, reshard_after_forward=reshard)
    fully_shard(model, reshard_after_forward=reshard)  # the root owns no parameters here
    step_model = model

x = torch.randn(8, 256)
for _ in range(3):  # measure the third step: DDP rebuilds its buckets after the first
    dist.barrier()
    t0 = sent_so_far()
    out = step_model(x)
    dist.barrier()
    t1 = sent_so_far()
    gathered_after_forward = sum(p.numel() for p in model.parameters() if not isinstance(p, DTensor))
    out.sum().backward()
    dist.barrier()
    t2 = sent_so_far()
    for p in model.parameters():
        p.grad = None
dist.barrier()  # nobody closes its sockets before every rank has read its counters

report("forward_sent_over_model", round((t1 - t0) / model_bytes, 2))
report("backward_sent_over_model", round((t2 - t1) / model_bytes, 2))
report("step_sent_over_model", round((t2 - t0) / model_bytes, 2))
report("unsharded_elems_after_forward", gathered_after_forward if strategy != "ddp" else None)
