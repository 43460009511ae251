import os

import torch
import torch.distributed as dist


def _mine(path):
    root, ext = os.path.splitext(path)
    return f"{root}_rank{dist.get_rank()}{ext}"


def save_checkpoint(model, step, path):
    """Write one checkpoint of `model` and `step` to `path` (called on every rank)."""
    torch.save({"model": model.state_dict(), "step": step}, _mine(path))  # no clashes


def load_checkpoint(model, path):
    """Load the checkpoint at `path` into `model` and return its step (called on every rank)."""
    state = torch.load(_mine(path), map_location="cpu")
    model.load_state_dict(state["model"])
    return state["step"]
