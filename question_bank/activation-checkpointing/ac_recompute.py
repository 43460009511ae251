# Activation checkpointing on four residual MLP blocks (one rank is enough):
# how often does each block's forward run, how many FLOPs does a step cost,
# and how many bytes of activations does autograd keep for backward?
import copy
import functools

import torch
from torch import nn
from torch.utils.checkpoint import (
    CheckpointPolicy,
    checkpoint,
    create_selective_checkpoint_contexts,
    set_checkpoint_early_stop,
)
from torch.utils.flop_counter import FlopCounterMode


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 256)
        self.fc2 = nn.Linear(256, 64)

    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(x)))


torch.manual_seed(0)
blocks = nn.ModuleList(Block() for _ in range(4))
reference = copy.deepcopy(blocks)
mode = params.get("mode", "full")             # none | full | selective

pre_calls, post_calls = [0], [0]
for b in blocks:
    b.register_forward_pre_hook(lambda m, a: pre_calls.__setitem__(0, pre_calls[0] + 1))
    b.register_forward_hook(lambda m, a, o: post_calls.__setitem__(0, post_calls[0] + 1))

# Bytes of tensors autograd saves outside checkpointed regions (parameters excluded,
# each storage counted once). Inside a region the checkpoint's own hooks take over.
param_storages = {p.untyped_storage().data_ptr() for p in blocks.parameters()}
saved = {}


def pack(t):
    storage = t.untyped_storage()
    if storage.data_ptr() not in param_storages:
        saved[storage.data_ptr()] = storage.nbytes()
    return t


def save_matmuls(ctx, func, *args, **kwargs):
    is_matmul = func in (torch.ops.aten.addmm.default, torch.ops.aten.mm.default)
    return CheckpointPolicy.MUST_SAVE if is_matmul else CheckpointPolicy.PREFER_RECOMPUTE


def run(h):
    for b in blocks:
        if mode == "none":
            h = b(h)
        elif mode == "full":
            h = checkpoint(b, h, use_reentrant=False)
        else:  # selective: keep matmul outputs, recompute the rest
            h = checkpoint(b, h, use_reentrant=False,
                           context_fn=functools.partial(create_selective_checkpoint_contexts, save_matmuls))
    return h


# The input requires grad, as a block's input does inside a larger model.
x = torch.randn(32, 64, requires_grad=True)
flops = FlopCounterMode(display=False)
with flops, set_checkpoint_early_stop(params.get("early_stop", True)):
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = run(x)
    forward_flops = flops.get_total_flops()
    forward_pre_calls = pre_calls[0]
    out.sum().backward()

h = x.detach().requires_grad_()
for b in reference:
    h = b(h)
h.sum().backward()

report("pre_hook_calls_forward", forward_pre_calls)
report("pre_hook_calls_step", pre_calls[0])
report("post_hook_calls_step", post_calls[0])
report("step_flops_over_forward_flops", flops.get_total_flops() / forward_flops)
report("saved_activation_bytes", sum(saved.values()))
pairs = zip(blocks.parameters(), reference.parameters(), strict=True)
report("grads_match_no_checkpoint", all(torch.allclose(p.grad, q.grad, atol=1e-6) for p, q in pairs))
