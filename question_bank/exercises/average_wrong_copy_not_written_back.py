import torch.distributed as dist


def sync_gradients(model):
    """Leave every rank with the gradient of the global mean loss."""
    n = dist.get_world_size()
    for p in model.parameters():
        if p.grad is not None:
            g = p.grad.clone()
            dist.all_reduce(g)
            g /= n
