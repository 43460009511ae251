import torch
import torch.distributed as dist


def mean_hook(state, bucket):
    n = dist.get_world_size()
    buf = bucket.buffer()
    # Sum on rank 0, divide there, and send the result back out: two collectives per bucket.
    dist.reduce(buf, dst=0)
    if dist.get_rank() == 0:
        buf /= n
    dist.broadcast(buf, src=0)
    fut = torch.futures.Future()
    fut.set_result(buf)
    return fut
