# Expert parallelism with one expert per rank. Every rank holds 16 tokens of width
# 1024 (4 KiB each in float32) and a top-1 routing of them to experts; a dispatch
# all_to_all_single sends each token to its expert's rank, the expert (a 1024 x 1024
# matmul) runs there, and a combine all_to_all_single sends the results back.
# params: routing (balanced: token t -> expert t % E; skewed: half of every rank's
# tokens pick expert 0), capacity_factor (0 = no cap), exchange_counts (whether the
# split sizes are exchanged before the tokens).
import ctypes
import math
import os
import socket
import struct

import torch
import torch.distributed as dist

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


def tcp_sockets():
    fds = []
    for name in os.listdir("/proc/self/fd"):
        try:
            is_socket = os.readlink(f"/proc/self/fd/{name}").startswith("socket:")
            if is_socket and bytes_sent(int(name)) is not None:
                fds.append(int(name))
        except OSError:
            pass
    return fds


def sent_so_far():
    dist.barrier()                       # every rank's sends of the phase have left
    return sum(bytes_sent(fd) for fd in sockets)


E = world_size                           # experts, one per rank
TOKENS, WIDTH = 16, 1024
KIB_PER_TOKEN = WIDTH * 4 / 1024
torch.manual_seed(0)
experts = [torch.randn(WIDTH, WIDTH) / WIDTH ** 0.5 for _ in range(E)]   # rank e applies experts[e]
torch.manual_seed(100 + rank)
x = torch.randn(TOKENS, WIDTH)

if params.get("routing", "balanced") == "balanced":
    expert_of = torch.arange(TOKENS) % E
else:
    histogram = {2: [12, 4], 4: [8, 4, 3, 1]}[E]          # tokens per expert, the same on every rank
    expert_of = torch.cat([torch.full((n,), e) for e, n in enumerate(histogram)])

cf = params.get("capacity_factor", 0)
capacity = math.ceil(cf * TOKENS / E) if cf else TOKENS    # per expert, for this rank's tokens
keep = torch.zeros(TOKENS, dtype=torch.bool)
for e in range(E):
    keep[(expert_of == e).nonzero().flatten()[:capacity]] = True   # tokens past the capacity are dropped
kept = keep.nonzero().flatten()
kept = kept[torch.argsort(expert_of[kept], stable=True)]          # grouped by destination expert
send_counts = torch.bincount(expert_of[kept], minlength=E)

if not params.get("exchange_counts", True):
    # guess: every peer sends as many tokens as this rank does, in equal splits. (No byte
    # readings on this path: a rank that fails here closes its sockets, and a peer still
    # reading its own would race with that.)
    recv = torch.empty(len(kept), WIDTH)
    dist.all_to_all_single(recv, x[kept], input_split_sizes=send_counts.tolist())
    report("completed_without_counts", True)
else:
    sockets = tcp_sockets()
    sent_so_far()
    base = sent_so_far()
    barrier_cost = sent_so_far() - base  # what one barrier of our own adds to a reading
    t0 = sent_so_far()
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)        # 1) split sizes: E integers each way
    t1 = sent_so_far()
    recv = torch.empty(int(recv_counts.sum()), WIDTH)
    dist.all_to_all_single(recv, x[kept], output_split_sizes=recv_counts.tolist(),
                           input_split_sizes=send_counts.tolist())   # 2) dispatch the tokens
    t2 = sent_so_far()
    y = recv @ experts[rank]                                 # 3) this rank's expert
    back = torch.empty(len(kept), WIDTH)
    dist.all_to_all_single(back, y, output_split_sizes=send_counts.tolist(),
                           input_split_sizes=recv_counts.tolist())   # 4) combine: the mirror image
    t3 = sent_so_far()

    # What the dispatch really delivered here: every rank's tokens are seeded, so each
    # received row is looked up among them. A token routed to this expert that never
    # arrived was dropped by its sender; one all_reduce adds the drops up per sender.
    inputs = [torch.randn(TOKENS, WIDTH, generator=torch.Generator().manual_seed(100 + r))
              for r in range(E)]
    delivered = torch.tensor([int((recv[:, None, :] == inputs[r][None]).all(-1).any(-1).sum())
                              for r in range(E)])
    routed_here = torch.full((E,), int((expert_of == rank).sum()))   # every rank routes alike
    dropped_by = routed_here - delivered
    dist.all_reduce(dropped_by)
    dist.barrier()                       # nobody closes its sockets before all have read them

    out = torch.zeros(TOKENS, WIDTH)     # a dropped token contributes nothing (the residual carries it)
    out[kept] = back
    want = torch.stack([x[t] @ experts[int(expert_of[t])] if keep[t] else torch.zeros(WIDTH)
                        for t in range(TOKENS)])
    dispatch_kib = (t2 - t1 - barrier_cost) / 1024
    combine_kib = (t3 - t2 - barrier_cost) / 1024
    report("matches_reference", torch.allclose(out, want, atol=1e-4))
    report("send_counts", send_counts)
    report("recv_counts", recv_counts)
    report("tokens_received", int(delivered.sum()))          # rows found in the dispatch's output
    report("delivered_from", delivered)
    report("tokens_dropped", int(dropped_by[rank]))          # this rank's tokens that never arrived
    report("counts_bytes", t1 - t0 - barrier_cost)
    report("dispatch_kib", round(dispatch_kib, 1))
    report("combine_kib", round(combine_kib, 1))
    report("dispatch_plus_combine_kib", round(dispatch_kib + combine_kib))
    report("tokens_sent_off_rank", int(send_counts.sum() - send_counts[rank]))
