import torch
import torch.distributed as dist


def mean_hook(state, bucket):
    n = dist.get_world_size()
    flat = torch.cat([g.flatten() for g in bucket.gradients()])  # a new tensor, not the bucket
    dist.all_reduce(flat)
    flat /= n
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())  # hands back the buffer, which was never reduced
    return fut
