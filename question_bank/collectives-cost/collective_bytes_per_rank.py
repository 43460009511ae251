# How many bytes does each rank send for one collective, as a multiple of the
# tensor each rank ends up holding? The kernel counts every TCP socket's sent
# bytes (TCP_INFO.tcpi_bytes_sent); we read them before and after the call.
import ctypes
import os
import socket
import struct

import torch
import torch.distributed as dist

# Offsets in struct tcp_info (Linux 4.19+). A retransmitted segment is counted again in
# tcpi_bytes_sent, so we take tcpi_bytes_retrans off: bytes sent once.
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


def tcp_sockets():
    fds = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                if bytes_sent(int(name)) is not None:
                    fds.append(int(name))
        except OSError:
            pass
    return fds


op = params["op"]
full = params.get("full_kib", 1024) * 1024  # bytes of the tensor every rank holds afterwards (float32)
n = full // 4
shard = n // world_size


def run_once():
    if op == "all_reduce":
        dist.all_reduce(torch.ones(n))
    elif op == "all_gather":  # each rank contributes 1/N, ends with the full tensor
        dist.all_gather_into_tensor(torch.empty(n), torch.ones(shard))
    elif op == "reduce_scatter":  # each rank contributes the full tensor, ends with 1/N of the sum
        dist.reduce_scatter_tensor(torch.empty(shard), torch.ones(n))
    elif op == "broadcast":  # rank 0's full tensor is copied to everyone
        dist.broadcast(torch.ones(n), src=0)


run_once()  # warm-up: the first use of a connection adds a little
dist.barrier()
sockets = tcp_sockets()
before = sum(bytes_sent(fd) for fd in sockets)
run_once()
dist.barrier()  # every peer has received everything, so all sends have left this rank
after = sum(bytes_sent(fd) for fd in sockets)
dist.barrier()  # nobody exits (closing its sockets) until every rank has read its counters

report("bytes_in_call", after - before)
report("kib_in_call", round((after - before) / 1024))
report("sent_over_full", round((after - before) / full, 2))
