import torch.distributed as dist


def attach_averaging_hooks(model):
    """After backward, every parameter's .grad is the average over ranks (as DDP's is)."""
    n = dist.get_world_size()

    def average(param):
        # Runs once the gradient has been accumulated into .grad: average it in place.
        param.grad.div_(n)
        dist.all_reduce(param.grad)

    for p in model.parameters():
        p.register_post_accumulate_grad_hook(average)
