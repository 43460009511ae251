import torch
import torch.distributed as dist


def save_checkpoint(model, step, path):
    """Write one checkpoint of `model` and `step` to `path` (called on every rank)."""
    if dist.get_rank() == 0:
        torch.save({"model": model.state_dict(), "step": step}, path)


def load_checkpoint(model, path):
    """Load the checkpoint at `path` into `model` and return its step (called on every rank)."""
    dist.barrier()  # rank 0 reaches this only once its save has returned: the file is complete
    state = torch.load(path, map_location="cpu")
    model.load_state_dict(state["model"])
    return state["step"]
