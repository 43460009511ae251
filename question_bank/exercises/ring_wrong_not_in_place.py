import torch
import torch.distributed as dist


def ring_all_reduce(tensor):
    """Sum `tensor` across all ranks, in place, with send/recv only."""
    n = dist.get_world_size()
    me = dist.get_rank()
    right, left = (me + 1) % n, (me - 1) % n
    chunks = [c.clone() for c in tensor.chunk(n)]  # contiguous buffers to send from
    for s in range(n - 1):
        send_i, recv_i = (me - s) % n, (me - s - 1) % n
        buf = torch.empty_like(chunks[recv_i])
        req = dist.isend(chunks[send_i], dst=right)
        dist.recv(buf, src=left)
        req.wait()
        chunks[recv_i] += buf
    for s in range(n - 1):
        send_i, recv_i = (me - s + 1) % n, (me - s) % n
        buf = torch.empty_like(chunks[recv_i])
        req = dist.isend(chunks[send_i], dst=right)
        dist.recv(buf, src=left)
        req.wait()
        chunks[recv_i].copy_(buf)
    return torch.cat(chunks)
