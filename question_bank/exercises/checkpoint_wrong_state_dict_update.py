import torch
import torch.distributed as dist


def save_checkpoint(model, step, path):
    """Write one checkpoint of `model` and `step` to `path` (called on every rank)."""
    if dist.get_rank() == 0:  # the replicas are identical: one copy is enough
        torch.save({"model": model.state_dict(), "step": step}, path)
    dist.barrier()  # nobody reads until rank 0 has finished writing


def load_checkpoint(model, path):
    """Load the checkpoint at `path` into `model` and return its step (called on every rank)."""
    state = torch.load(path, map_location="cpu")
    model.state_dict().update(state["model"])
    return state["step"]
