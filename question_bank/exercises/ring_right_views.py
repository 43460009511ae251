import torch
import torch.distributed as dist


def _step(chunks, send_i, recv_i, right, left, combine):
    incoming = torch.empty_like(chunks[recv_i])
    ops = [dist.P2POp(dist.isend, chunks[send_i].contiguous(), right),
           dist.P2POp(dist.irecv, incoming, left)]
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    combine(chunks[recv_i], incoming)


def ring_all_reduce(tensor):
    """Sum `tensor` across all ranks, in place, with send/recv only."""
    n, me = dist.get_world_size(), dist.get_rank()
    right, left = (me + 1) % n, (me - 1) % n
    chunks = tensor.tensor_split(n)  # views into `tensor`: writing a chunk writes the tensor
    for s in range(n - 1):  # reduce-scatter: chunk (me + 1) % n ends up complete here
        _step(chunks, (me - s) % n, (me - s - 1) % n, right, left, torch.Tensor.add_)
    for s in range(n - 1):  # all-gather: pass the complete chunks on around the ring
        _step(chunks, (me - s + 1) % n, (me - s) % n, right, left, torch.Tensor.copy_)
    return tensor
