import torch.distributed as dist


def attach_averaging_hooks(model):
    """After backward, every parameter's .grad is the average over ranks (as DDP's is)."""
    n = dist.get_world_size()

    def average(grad):
        grad = grad / n  # DDP divides before its all-reduce
        dist.all_reduce(grad)
        return grad / n

    for p in model.parameters():
        p.register_hook(average)
