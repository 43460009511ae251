# A reduce-scatter followed by an all-gather, against one all-reduce, on the same data:
# results and bytes sent per rank (kernel socket counters).
import ctypes
import os
import socket
import struct

import torch
import torch.distributed as dist

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


n = 65536 * world_size
torch.manual_seed(rank)
data = torch.randn(n)


def two_step():
    shard = torch.empty(n // world_size)
    dist.reduce_scatter_tensor(shard, data.clone())
    full = torch.empty(n)
    dist.all_gather_into_tensor(full, shard)
    return full


def one_call():
    t = data.clone()
    dist.all_reduce(t)
    return t


results, sent = {}, {}
for name, fn in (("two_step", two_step), ("all_reduce", one_call)):
    fn()
    dist.barrier()
    before = sent_now()
    results[name] = fn()
    dist.barrier()
    sent[name] = sent_now() - before
dist.barrier()
report("same_result", torch.allclose(results["two_step"], results["all_reduce"], atol=1e-5))
report("bytes_ratio", round(sent["two_step"] / sent["all_reduce"], 3))
