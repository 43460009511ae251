import torch
import torch.distributed as dist


def save_checkpoint(model, step, path):
    """Write one checkpoint of `model` and `step` to `path` (called on every rank)."""
    torch.save({"model": model.state_dict(), "step": step}, path)  # same bytes from every rank
    dist.barrier()


def load_checkpoint(model, path):
    """Load the checkpoint at `path` into `model` and return its step (called on every rank)."""
    state = torch.load(path, map_location="cpu")
    model.load_state_dict(state["model"])
    return state["step"]
