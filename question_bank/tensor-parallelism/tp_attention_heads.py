# Self-attention with 4 heads of width 4 (model width 16), tensor-parallel over the
# ranks: the q/k/v projections column-parallel, the output projection row-parallel.
# params["qkv"] picks how q, k and v are produced; params["heads"] how many heads
# forward() reshapes into. The unsplit module is the reference for every variant.
import copy

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate
from torch.distributed.tensor.debug import CommDebugMode
from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                               parallelize_module)

D, HEADS = 16, 4
HEAD_DIM = D // HEADS


def attend(q, k, v, heads):
    b, t, _ = q.shape
    q, k, v = (z.reshape(b, t, heads, HEAD_DIM).transpose(1, 2) for z in (q, k, v))
    a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return a.transpose(1, 2).reshape(b, t, -1)


class Attention(nn.Module):                 # separate q, k and v projections
    def __init__(self):
        super().__init__()
        self.q, self.k, self.v = (nn.Linear(D, D, bias=False) for _ in range(3))
        self.o = nn.Linear(D, D, bias=False)

    def forward(self, x, heads):
        return self.o(attend(self.q(x), self.k(x), self.v(x), heads))


class FusedAttention(nn.Module):            # one Linear(16, 48) whose output is cut into q | k | v
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(D, 3 * D, bias=False)
        self.o = nn.Linear(D, D, bias=False)

    def forward(self, x, heads):
        return self.o(attend(*self.qkv(x).chunk(3, dim=-1), heads))


class Block(nn.Module):
    def __init__(self, attn):
        super().__init__()
        self.attn = attn

    def forward(self, x, heads):
        return x + self.attn(x, heads)


def counts(mode):
    return {str(op).split(".")[-1]: n for op, n in mode.get_comm_counts().items()}


torch.manual_seed(0)
ref = Block(Attention())
x = torch.randn(2, 6, D)
x_ref = x.clone().requires_grad_(True)
want = ref(x_ref, HEADS)
want.sum().backward()

layout = params.get("qkv", "separate")
if layout.startswith("fused"):
    model = Block(FusedAttention())
    w = torch.cat([ref.attn.q.weight, ref.attn.k.weight, ref.attn.v.weight]).detach()   # rows: q | k | v
    if layout == "fused_per_rank":
        # Megatron's layout: rank r's contiguous block of rows holds q, k and v of rank r's heads
        w = torch.cat([part.chunk(world_size)[r] for r in range(world_size) for part in w.chunk(3)])
    model.attn.qkv.weight.data.copy_(w)
    model.attn.o.weight.data.copy_(ref.attn.o.weight)
    plan = {"attn.qkv": ColwiseParallel(), "attn.o": RowwiseParallel()}
else:
    model = copy.deepcopy(ref)
    plan = {"attn.q": ColwiseParallel(), "attn.k": ColwiseParallel(), "attn.v": ColwiseParallel(),
            "attn.o": RowwiseParallel()}
    if layout == "shared_input":
        # hand q, k and v one replicated DTensor, so their three input gradients meet before one all-reduce
        plan["attn"] = PrepareModuleInput(input_layouts=(Replicate(), None),
                                          desired_input_layouts=(Replicate(), None), use_local_output=False)
parallelize_module(model, init_device_mesh("cpu", (world_size,)), plan)

proj = model.attn.q if hasattr(model.attn, "q") else model.attn.qkv
widths = {}
proj.register_forward_hook(lambda mod, args, out: widths.update(width=out.shape[-1]))
heads = HEADS // world_size if params.get("heads", "local") == "local" else HEADS
x_tp = x.clone().requires_grad_(True)
with CommDebugMode() as fwd:
    out = model(x_tp, heads)                 # raises if `heads` does not fit this rank's slice
with CommDebugMode() as bwd:
    out.sum().backward()
report("projection_local_width", widths["width"])
report("forward_collectives", counts(fwd))
report("backward_collectives", counts(bwd))
report("backward_all_reduces", counts(bwd).get("all_reduce", 0))
report("output_matches_unsplit", torch.allclose(out, want, atol=1e-5))
report("input_grad_matches_unsplit", torch.allclose(x_tp.grad, x_ref.grad, atol=1e-5))
