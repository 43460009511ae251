# Four MLP blocks (Linear h->4h, GELU, Linear 4h->h) over 64 tokens, float32.
# After the forward, which activation tensors are still alive, waiting for
# backward? We track every tensor the forward creates and, once it is done,
# add up the storages that are still referenced (parameters and the final
# output excluded).
import gc

import torch
from torch import nn
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)
h, tokens, n_blocks = 32, 64, 4
blocks = nn.ModuleList(
    nn.Sequential(nn.Linear(h, 4 * h, bias=False), nn.GELU(), nn.Linear(4 * h, h, bias=False))
    for _ in range(n_blocks))
weights = {p.untyped_storage().data_ptr() for p in blocks.parameters()}


class TrackStorages(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.made = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                s = t.untyped_storage()
                if s.data_ptr() not in weights:
                    self.made.setdefault(s.data_ptr(), (StorageWeakRef(s), s.nbytes()))
        return out


def alive_after_forward(mode):
    tracker = TrackStorages()
    with tracker:
        x = torch.randn(tokens, h, requires_grad=True)  # the first block's input
        y = x
        for block in blocks:
            if mode == "none":
                y = block(y)
            else:  # keep only the block's input; rerun the block in backward
                y = checkpoint(block, y, use_reentrant=(mode == "reentrant"))
    gc.collect()
    # The final output is alive only because we hold it for the loss: not counted.
    final = y.untyped_storage().data_ptr()
    alive = sum(n for ptr, (ref, n) in tracker.made.items() if not ref.expired() and ptr != final)
    y.sum().backward()  # the graph is complete either way
    return alive


report("alive_kib_no_checkpoint", alive_after_forward("none") / 1024)
report("alive_kib_checkpoint", alive_after_forward("non_reentrant") / 1024)
report("alive_kib_checkpoint_reentrant", alive_after_forward("reentrant") / 1024)
report("one_block_input_kib", tokens * h * 4 / 1024)
