# Bytes a rank sends over k micro-batches of gradient accumulation on a 1 MiB model, with
# no_sync for all but the last micro-batch, against a plain loop that syncs each time.
import ctypes
import os
import socket
import struct

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

TCPI_BYTES_SENT, TCPI_BYTES_RETRANS = 200, 208
libc = ctypes.CDLL(None, use_errno=True)


def sent_now():
    total = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            if not os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                continue
        except OSError:
            continue
        buf = ctypes.create_string_buffer(232)
        size = ctypes.c_uint32(len(buf))
        if libc.getsockopt(int(name), socket.IPPROTO_TCP, socket.TCP_INFO, buf, ctypes.byref(size)) == 0 \
                and size.value >= TCPI_BYTES_RETRANS + 8:
            sent, retrans = struct.unpack_from("QQ", buf.raw, TCPI_BYTES_SENT)
            total += sent - retrans
    return total


k = params["k"]
torch.manual_seed(0)
model = nn.Linear(512, 512, bias=False)             # 1 MiB of float32 gradients
ddp = DDP(model)
for _ in range(2):                                  # warm-up: buckets rebuilt
    ddp(torch.ones(1, 512)).sum().backward()


def loop(use_no_sync):
    dist.barrier()
    before = sent_now()
    for mb in range(k):
        if use_no_sync and mb < k - 1:
            with ddp.no_sync():
                ddp(torch.ones(1, 512)).sum().backward()
        else:
            ddp(torch.ones(1, 512)).sum().backward()
    dist.barrier()
    return sent_now() - before


with_no_sync = loop(True)
every_time = loop(False)
dist.barrier()
report("ratio_no_sync_to_every", round(with_no_sync / every_time, 3))
