# Context parallelism two ways on gloo, one attention forward each. Every rank holds 128
# tokens of the sequence (world_size blocks in order) for 8 query heads of dimension 16 and
# `kv_heads` K/V heads (grouped-query attention when kv_heads < 8), float32.
#   Ulysses: all-to-all Q, K and V so each rank holds the whole sequence for 8/N of the
#            heads, attend, then all-to-all the output back to its own tokens.
#   Ring:    keep the queries, pass the K/V block around the ring N - 1 times.
# The kernel's per-socket counters give the bytes each rank sends for each scheme.
import ctypes
import os
import socket
import struct

import torch
import torch.distributed as dist

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


def sent_now():
    total = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                total += bytes_sent(int(name)) or 0
        except OSError:
            pass
    return total


N, L, H, D = world_size, 128, 8, 16
HKV = params["kv_heads"]
torch.manual_seed(0)
q_all = torch.randn(N * L, H, D)
k_all, v_all = torch.randn(2, N * L, HKV, D).unbind(0)
mine = slice(rank * L, (rank + 1) * L)
group = H // HKV                                            # query heads per K/V head
full = torch.softmax(torch.einsum("qhd,khd->hqk", q_all, k_all.repeat_interleave(group, 1)) / D ** 0.5, -1)
full_out = torch.einsum("hqk,khd->qhd", full, v_all.repeat_interleave(group, 1))


def to_heads(x):                  # [L, heads, D] -> [N*L, heads/N, D]: whole sequence, my heads
    h = x.shape[1] // N
    send = x.view(L, N, h, D).permute(1, 0, 2, 3).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)
    return recv.reshape(N * L, h, D)


def to_tokens(x):                 # [N*L, heads/N, D] -> [L, heads, D]: my tokens, all heads
    h = x.shape[1]
    send = x.view(N, L, h, D).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)
    return recv.permute(1, 0, 2, 3).reshape(L, N * h, D)


def ulysses():
    q, k, v = to_heads(q_all[mine].contiguous()), to_heads(k_all[mine].contiguous()), to_heads(v_all[mine].contiguous())
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    p = torch.softmax(torch.einsum("qhd,khd->hqk", q, k) / D ** 0.5, -1)
    return to_tokens(torch.einsum("hqk,khd->qhd", p, v).contiguous())


def ring():
    q = q_all[mine]
    kv = torch.stack([k_all[mine], v_all[mine]]).contiguous()
    run_max = torch.full((H, L, 1), float("-inf"))
    run_sum, acc = torch.zeros(H, L, 1), torch.zeros(H, L, D)
    for step in range(N):
        if step < N - 1:
            incoming = torch.empty_like(kv)
            reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, kv, (rank + 1) % N),
                                           dist.P2POp(dist.irecv, incoming, (rank - 1) % N)])
        k, v = kv[0].repeat_interleave(group, 1), kv[1].repeat_interleave(group, 1)
        s = torch.einsum("qhd,khd->hqk", q, k) / D ** 0.5
        new_max = torch.maximum(run_max, s.amax(-1, keepdim=True))
        p, rescale = torch.exp(s - new_max), torch.exp(run_max - new_max)
        run_sum = run_sum * rescale + p.sum(-1, keepdim=True)
        acc = acc * rescale + torch.einsum("hqk,khd->hqd", p, v)
        run_max = new_max
        if step < N - 1:
            for r in reqs:
                r.wait()
            kv = incoming
    return (acc / run_sum).permute(1, 0, 2)


results = {}
for name, fn in (("ulysses", ulysses), ("ring", ring)):
    fn()                                                    # warm the connections up
    dist.barrier()
    before = sent_now()
    out = fn()
    dist.barrier()
    results[name] = sent_now() - before
    report(f"{name}_matches_full_attention", torch.allclose(out, full_out[mine], atol=1e-5))
dist.barrier()                                              # nobody closes sockets before all have read
report("ulysses_kib", round(results["ulysses"] / 1024, 1))
report("ring_kib", round(results["ring"] / 1024, 1))
report("ring_over_ulysses", round(results["ring"] / results["ulysses"], 3))
