import torch
import torch.distributed as dist


def ring_all_reduce(tensor):
    """Sum `tensor` across all ranks, in place, with send/recv only."""
    n = dist.get_world_size()
    me = dist.get_rank()
    right, left = (me + 1) % n, (me - 1) % n
    chunks = list(tensor.chunk(n))
    # Reduce-scatter: after n - 1 steps, chunk (me + 1) % n holds the full sum.
    for s in range(n - 1):
        send_i, recv_i = (me - s) % n, (me - s - 1) % n
        buf = torch.empty_like(chunks[recv_i])
        req = dist.isend(chunks[send_i].contiguous(), dst=right)
        dist.recv(buf, src=left)
        req.wait()
        chunks[recv_i] += buf
    return tensor
