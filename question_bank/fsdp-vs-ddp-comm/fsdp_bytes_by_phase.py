# One resharding FSDP2 step on gloo, then a model-sized all-gather and reduce-scatter on
# their own, each as bytes this rank put on gloo's sockets (TCP_INFO.tcpi_bytes_sent less
# resent bytes) divided by the model's float32 size.
import ctypes
import os
import socket
import struct

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard

TCPI_BYTES_SENT, TCPI_BYTES_RETRANS = 200, 208   # offsets in struct tcp_info (Linux 4.19+)
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
    dist.barrier()                        # the phase's sends have all left every rank
    total = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                total += bytes_sent(int(name)) or 0
        except OSError:
            pass
    return total


torch.manual_seed(0)
model = nn.Sequential(*[nn.Linear(256, 256) for _ in range(4)])
numel = sum(p.numel() for p in model.parameters())
model_bytes = 4 * numel                    # Ψ: 1,052,672 bytes of float32
for layer in model:
    fully_shard(layer)                     # one unit per layer, resharded after forward
fully_shard(model)

x = torch.randn(8, 256)
barrier_cost = sent_so_far()
barrier_cost = sent_so_far() - barrier_cost   # what one reading's own barrier adds
for _ in range(2):                         # the second step is measured
    t0 = sent_so_far()
    out = model(x)
    t1 = sent_so_far()
    out.sum().backward()
    t2 = sent_so_far()
    for p in model.parameters():
        p.grad = None

# The same sizes as a bare collective each: what the backend sends for that operation.
full = torch.empty(numel - numel % world_size)
shard = torch.ones(full.numel() // world_size)
t3 = sent_so_far()
dist.all_gather_single(full, shard)
t4 = sent_so_far()
dist.reduce_scatter_single(shard, torch.ones_like(full))
t5 = sent_so_far()
dist.barrier()                             # nobody closes its sockets before all have read


def share(a, b):
    return round((b - a - barrier_cost) / model_bytes, 2)


report("forward_over_model", share(t0, t1))
report("backward_over_model", share(t1, t2))
report("step_over_model", share(t0, t2))
report("all_gather_over_model", share(t3, t4))
report("reduce_scatter_over_model", share(t4, t5))
