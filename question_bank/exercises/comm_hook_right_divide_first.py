import torch.distributed as dist


def mean_hook(state, bucket):
    """A DDP comm hook: average `bucket`'s gradients over the ranks."""
    buffer = bucket.buffer()
    buffer.div_(dist.get_world_size())  # divide first: the sum of the shares is the mean
    work = dist.all_reduce(buffer, async_op=True)
    return work.get_future().then(lambda fut: fut.value()[0])
