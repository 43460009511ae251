# One all-reduce of a float32 tensor of `size_kib` KiB on world_size gloo ranks. Each rank
# reads its own sockets' sent bytes (TCP_INFO) around the call; the per-rank counts are summed.
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


n = params["size_kib"] * 1024 // 4
dist.all_reduce(torch.ones(n))                      # warm-up
dist.barrier()
before = sent_now()
dist.all_reduce(torch.ones(n))
dist.barrier()
mine = torch.tensor([float(sent_now() - before)])
dist.barrier()
everyone = mine.clone()
dist.all_reduce(everyone)
report("kib_sent_by_all_ranks", round(everyone.item() / 1024))
report("kib_sent_by_this_rank", round(mine.item() / 1024))
