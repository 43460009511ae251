# Count the FLOPs of one training step (forward + backward) of four bias-free
# MLP blocks with torch's FLOP counter, and divide by parameters x tokens.
# The input requires grad, as a transformer's embedding output does, so every
# layer computes both its input and its weight gradient in backward.
import torch
import torch.utils.checkpoint as ckpt
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

torch.manual_seed(0)
h, tokens, n_blocks = 32, 64, 4
blocks = nn.ModuleList(
    nn.Sequential(nn.Linear(h, 4 * h, bias=False), nn.GELU(), nn.Linear(4 * h, h, bias=False))
    for _ in range(n_blocks))
n_params = sum(p.numel() for p in blocks.parameters())
mode = params["recompute"]

# How many times each block's first and second Linear finish a forward.
finished = {"first": 0, "second": 0}
for block in blocks:
    block[0].register_forward_hook(lambda *_: finished.__setitem__("first", finished["first"] + 1))
    block[2].register_forward_hook(lambda *_: finished.__setitem__("second", finished["second"] + 1))


def step():
    x = torch.randn(tokens, h, requires_grad=True)
    with FlopCounterMode(display=False) as counter:
        y = x
        for block in blocks:
            if mode == "none":
                y = block(y)
            else:  # full activation checkpointing of each block
                y = ckpt.checkpoint(block, y, use_reentrant=(mode == "reentrant"))
        y.sum().backward()
    return counter.get_total_flops()


if mode == "non_reentrant_no_early_stop":
    # By default non-reentrant recomputation stops as soon as every tensor the
    # original forward saved has been rebuilt; this turns that off.
    with ckpt.set_checkpoint_early_stop(False):
        flops = step()
else:
    flops = step()
report("n_params", n_params)
report("flops", flops)
report("flops_per_param_token", flops / (n_params * tokens))
report("first_linear_forwards_per_block", finished["first"] / n_blocks)
report("second_linear_forwards_per_block", finished["second"] / n_blocks)
