# How many bytes does each rank put on the wire for one all_reduce?
# The kernel counts every TCP socket's sent bytes (TCP_INFO.tcpi_bytes_sent);
# we sum them over this process's TCP sockets before and after the collective.
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
    """The kernel's bytes-sent counter of one TCP socket, or None if fd is not one.

    Calls getsockopt(2) directly rather than wrapping gloo's descriptor in a
    Python socket object.
    """
    buf = ctypes.create_string_buffer(232)
    size = ctypes.c_uint32(len(buf))
    if libc.getsockopt(fd, socket.IPPROTO_TCP, socket.TCP_INFO, buf, ctypes.byref(size)) != 0:
        return None
    if size.value < TCPI_BYTES_RETRANS + 8:
        return None
    sent, retrans = struct.unpack_from("QQ", buf.raw, TCPI_BYTES_SENT)
    return sent - retrans


def tcp_sockets():
    """This process's TCP sockets: gloo's connections to its peers, plus the store's."""
    fds = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                if bytes_sent(int(name)) is not None:
                    fds.append(int(name))
        except OSError:
            pass
    return fds


size_bytes = 4 * 1024 * 1024  # a 4 MiB float32 gradient
grad = torch.ones(size_bytes // 4)
dist.all_reduce(torch.ones(size_bytes // 4))  # warm-up: first use of a connection adds a little
dist.barrier()
sockets = tcp_sockets()
before = sum(bytes_sent(fd) for fd in sockets)
dist.all_reduce(grad)
dist.barrier()  # every peer has received everything, so all sends have left this rank
after = sum(bytes_sent(fd) for fd in sockets)
dist.barrier()  # nobody exits (closing its connections) until every rank has read its counters

sent = after - before
report("bytes_sent", sent)
report("sent_over_size", round(sent / size_bytes, 2))
report("ring_formula", round(2 * (world_size - 1) / world_size, 2))
report("sum_is_correct", bool(grad[0].item() == world_size))
