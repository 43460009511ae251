import torch.distributed as dist


def attach_averaging_hooks(model):
    """After backward, every parameter's .grad is the average over ranks (as DDP's is)."""
    n = dist.get_world_size()

    def average(grad):
        grad = grad / n
        dist.all_reduce(grad)
        return grad

    for p in model.parameters():
        if p.dim() > 1:  # the weight matrices are what matter
            p.register_hook(average)
