# The all-gather-then-matmul of a sequence-parallel column-parallel layer, two ways, on
# world_size gloo ranks. X is sharded by rows (tokens): rank r holds X_r, 256 x 64.
# W is split by columns: rank r holds W_r, 64 x 32. Each rank needs [X_0; ...; X_N-1] @ W_r.
#   plain:      all_gather_into_tensor(X), then one matmul;
#   decomposed: multiply the shard in hand while passing it to the next rank, N times
#               (the pattern async tensor parallelism uses to hide the all-gather).
import ctypes
import os
import socket
import struct

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode

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


N, M = world_size, 256
torch.manual_seed(0)
x_all = torch.randn(N * M, 64)
w = torch.randn(64, 32 * N)[:, rank * 32:(rank + 1) * 32].contiguous()
x = x_all[rank * M:(rank + 1) * M].contiguous()


class CountMatmuls(TorchDispatchMode):
    # Counts the matrix multiplications torch actually dispatches, whoever asks for them.
    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket in (torch.ops.aten.mm, torch.ops.aten.addmm, torch.ops.aten.bmm):
            self.count += 1
        return func(*args, **(kwargs or {}))


def plain():
    gathered = torch.empty(N * M, 64)
    dist.all_gather_into_tensor(gathered, x)
    return gathered @ w


def decomposed():
    out = torch.empty(N * M, 32)
    chunk, owner = x, rank
    for step in range(N):
        if step < N - 1:                                       # start passing the shard on ...
            incoming = torch.empty_like(chunk)
            reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, chunk, (rank + 1) % N),
                                           dist.P2POp(dist.irecv, incoming, (rank - 1) % N)])
        out[owner * M:(owner + 1) * M] = chunk @ w             # ... while multiplying it
        if step < N - 1:
            for r in reqs:
                r.wait()
            chunk, owner = incoming, (owner - 1) % N
    return out


sent = {}
for name, fn in (("plain", plain), ("decomposed", decomposed)):
    fn()
    dist.barrier()
    before = sent_now()
    with CountMatmuls() as counter:
        result = fn()
    dist.barrier()
    sent[name] = sent_now() - before
    report(f"{name}_matmuls", counter.count)
    report(f"{name}_correct", torch.allclose(result, x_all @ w, atol=1e-4))
dist.barrier()
report("decomposed_over_plain_bytes", round(sent["decomposed"] / sent["plain"], 3))
report("plain_kib", round(sent["plain"] / 1024))
