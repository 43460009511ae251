# How many bytes does each rank put on the wire for one all_reduce?
# The kernel counts every TCP socket's sent bytes (TCP_INFO.tcpi_bytes_sent);
# we sum them over this process's sockets before and after the collective.
import os
import socket
import struct

import torch
import torch.distributed as dist

TCPI_BYTES_SENT = 200  # offset of tcpi_bytes_sent in struct tcp_info (Linux 4.19+)


def tcp_bytes_sent():
    total = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if not os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                continue
            sock = socket.socket(fileno=int(fd))
        except OSError:
            continue
        try:
            if sock.type == socket.SOCK_STREAM:
                info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 232)
                if len(info) >= TCPI_BYTES_SENT + 8:
                    total += struct.unpack_from("Q", info, TCPI_BYTES_SENT)[0]
        except OSError:
            pass
        finally:
            sock.detach()  # never close gloo's socket
    return total


size_bytes = 4 * 1024 * 1024  # a 4 MiB float32 gradient
grad = torch.ones(size_bytes // 4)
dist.barrier()
before = tcp_bytes_sent()
dist.all_reduce(grad)
dist.barrier()  # every peer has received everything, so all sends have left this rank
after = tcp_bytes_sent()

sent = after - before
report("bytes_sent", sent)
report("sent_over_size", round(sent / size_bytes, 2))
report("ring_formula", round(2 * (world_size - 1) / world_size, 2))
report("sum_is_correct", bool(grad[0].item() == world_size))
