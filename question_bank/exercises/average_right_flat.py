import torch
import torch.distributed as dist


def sync_gradients(model):
    """Leave every rank with the gradient of the global mean loss."""
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    # One all-reduce of every gradient side by side, divided before it (the sum of means over
    # world_size is the mean of the global batch either way).
    flat = torch.cat([g.flatten() for g in grads]) / dist.get_world_size()
    dist.all_reduce(flat)
    offset = 0
    for g in grads:
        g.copy_(flat[offset:offset + g.numel()].view_as(g))
        offset += g.numel()
