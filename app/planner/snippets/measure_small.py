# The planner's "measure it small": a tiny model laid out like the learner's plan on at most
# four gloo ranks, trained for two steps; the second is measured. The planner's formulas
# predict what this rank should hold and send; this reports what it does.
#
# params: dp, tp, pp (degrees), zero (0-3), m (micro-batches per step), v (model chunks per
# pipeline rank), hidden, blocks (MLP blocks in the whole model), rows, seq (one micro-batch
# is rows × seq tokens). Ranks are laid out tensor-fastest, then data, then pipeline
# (Megatron's order): rank = (pp_rank × dp + dp_rank) × tp + tp_rank.
#
# The model: `blocks` residual MLP blocks, h -> 4h -> h, in bf16, tensor-parallel the
# Megatron way (the first matrix split by columns with its bias, the second by rows, an
# all-reduce after it; its bias b2 is kept whole on every tensor rank). The optimizer keeps
# an fp32 master copy of the parameters and Adam's two fp32 moments (2 + 2 + 12 bytes per
# parameter). ZeRO-1/2 shard the optimizer (and gradients) over the data-parallel group by
# hand: one flat buffer, padded to a multiple of dp, reduce-scattered, the updated parameters
# all-gathered. ZeRO-3 is FSDP2 (`fully_shard`) over the data-parallel group.
import math

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import init_device_mesh

dp, tp, pp, zero = params["dp"], params["tp"], params["pp"], params["zero"]
m, v, hidden, blocks = params["m"], params["v"], params["hidden"], params["blocks"]
rows, seq = params["rows"], params["seq"]
mesh = init_device_mesh("cpu", (pp, dp, tp), mesh_dim_names=("pp", "dp", "tp"))
pp_group, dp_group, tp_group = mesh.get_group("pp"), mesh.get_group("dp"), mesh.get_group("tp")
pp_rank, dp_rank = mesh.get_local_rank("pp"), mesh.get_local_rank("dp")


class CopyToTensorRanks(torch.autograd.Function):
    """Megatron's f: identity forward, all-reduce of the input's gradient backward."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous()
        dist.all_reduce(grad, group=tp_group)
        return grad


class SumOverTensorRanks(torch.autograd.Function):
    """Megatron's g: all-reduce forward, identity backward."""

    @staticmethod
    def forward(ctx, x):
        x = x.contiguous()
        dist.all_reduce(x, group=tp_group)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Linear(hidden, 4 * hidden // tp)              # column-parallel, bias split
        self.w2 = nn.Linear(4 * hidden // tp, hidden, bias=False)  # row-parallel
        self.b2 = nn.Parameter(torch.zeros(hidden))                # whole on every tensor rank

    def forward(self, x):
        if tp > 1:
            x_in = CopyToTensorRanks.apply(x)
            return x + SumOverTensorRanks.apply(self.w2(F.gelu(self.w1(x_in)))) + self.b2
        return x + self.w2(F.gelu(self.w1(x))) + self.b2


def loss_fn(out, target):
    return ((out.float() - target.float()) ** 2).mean()


# This rank's chunks of the model: chunk c holds blocks [c·k, (c+1)·k); pipeline rank r
# holds chunks r, r + pp, ... (interleaved when v > 1).
chunks = pp * v
per_chunk = blocks // chunks
my_chunks = [pp_rank + i * pp for i in range(v)]
torch.manual_seed(0)
modules = {}
for c in range(chunks):  # every rank builds the same blocks, then keeps its own
    module = nn.Sequential(*[Block() for _ in range(per_chunk)]).to(torch.bfloat16)
    if c in my_chunks:
        modules[c] = module
stage_modules = [modules[c] for c in my_chunks]

if zero == 3:
    from torch.distributed.fsdp import fully_shard
    dp_mesh = mesh["dp"]
    for module in stage_modules:
        for block in module:
            fully_shard(block, mesh=dp_mesh)
        fully_shard(module, mesh=dp_mesh)


def local(t):
    """The tensor this rank holds (an FSDP2 parameter is a DTensor: its local shard)."""
    return t.to_local() if hasattr(t, "to_local") else t


params_here = [p for module in stage_modules for p in module.parameters()]
numel_here = sum(p.numel() for p in params_here)  # the full (unsharded) count of this stage
# ZeRO-1/2's flat buffer: this rank's parameters, padded to a multiple of dp.
shard_len = math.ceil(numel_here / dp)
padded_len = shard_len * dp
if zero in (1, 2):
    lo = dp_rank * shard_len
    flat = torch.cat([p.detach().reshape(-1) for p in params_here]
                     + [torch.zeros(padded_len - numel_here, dtype=torch.bfloat16)])
    master = flat[lo:lo + shard_len].float().clone().requires_grad_(False)
elif zero == 3:
    master = torch.cat([local(p).detach().reshape(-1) for p in params_here]).float()
else:
    master = torch.cat([p.detach().reshape(-1) for p in params_here]).float()
master = nn.Parameter(master)
adam = torch.optim.Adam([master], lr=1e-3)
grad_shard = None

x = torch.randn(m * rows, seq, hidden, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
# In a whole model the first block's input comes from the embedding, so its gradient is
# computed (and all-reduced over the tensor ranks): the same here.
x.requires_grad_(True)
target = torch.randn(m * rows, seq, hidden, generator=torch.Generator().manual_seed(2)).to(torch.bfloat16)

if pp > 1:
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleInterleaved1F1B
    stages = [PipelineStage(modules[c], stage_index=c, num_stages=chunks, device=torch.device("cpu"),
                            group=pp_group) for c in my_chunks]
    if v == 1:
        schedule = Schedule1F1B(stages[0], n_microbatches=m, loss_fn=loss_fn)
    else:
        schedule = ScheduleInterleaved1F1B(stages, n_microbatches=m, loss_fn=loss_fn)


def forward_backward():
    """One step's forward and backward over m micro-batches: the pipeline schedule, or a
    gradient-accumulation loop without a pipeline."""
    if pp > 1:
        if pp_rank == 0:
            schedule.step(x)
        elif pp_rank == pp - 1:
            schedule.step(target=target)
        else:
            schedule.step()
        return
    model = stage_modules[0]
    for i in range(m):
        if zero == 3:
            model.set_requires_gradient_sync(i == m - 1)
        loss = loss_fn(model(x[i * rows:(i + 1) * rows]), target[i * rows:(i + 1) * rows]) / m
        loss.backward()


def sync_and_step():
    """Data parallelism after backward, then the optimizer step on the fp32 master copy."""
    global grad_shard
    if zero == 3:  # FSDP2 reduce-scattered the gradients in the last backward
        master.grad = torch.cat([local(p.grad).reshape(-1) for p in params_here]).float()
    elif zero == 0:
        flat_grad = torch.cat([p.grad.reshape(-1) for p in params_here])
        if dp > 1:
            dist.all_reduce(flat_grad, group=dp_group)
            flat_grad /= dp
        master.grad = flat_grad.float()
    else:
        flat_grad = torch.cat([p.grad.reshape(-1) for p in params_here]
                              + [torch.zeros(padded_len - numel_here, dtype=torch.bfloat16)])
        grad_shard = torch.empty(shard_len, dtype=torch.bfloat16)
        dist.reduce_scatter_tensor(grad_shard, flat_grad, group=dp_group)
        grad_shard /= dp
        if zero == 2:  # ZeRO-2 keeps only its shard of the gradients
            for p in params_here:
                p.grad = None
        master.grad = grad_shard.float()
    measure_state()
    adam.step()
    adam.zero_grad(set_to_none=True)
    if zero in (1, 2):  # everyone's updated shard, back into the bf16 parameters
        new_flat = torch.empty(padded_len, dtype=torch.bfloat16)
        dist.all_gather_into_tensor(new_flat, master.detach().to(torch.bfloat16), group=dp_group)
        offset = 0
        for p in params_here:
            p.data.copy_(new_flat[offset:offset + p.numel()].view_as(p))
            offset += p.numel()
    else:
        offset = 0
        for p in params_here:
            n = local(p).numel()
            local(p).data.copy_(master.detach()[offset:offset + n].view_as(local(p)))
            offset += n
    for p in params_here:
        p.grad = None


state = {}


def measure_state():
    """Bytes of the tensors this rank holds between backward and the optimizer step."""
    nbytes = lambda t: t.numel() * t.element_size()  # noqa: E731
    state["param_bytes"] = sum(nbytes(local(p)) for p in params_here)
    # ZeRO-2 keeps only its reduced shard; ZeRO-0/1 the whole gradient (ZeRO-1's reduced
    # shard is a transient buffer, left out); ZeRO-3 FSDP2's sharded gradients.
    grads = [grad_shard] if zero == 2 else [local(p.grad) for p in params_here]
    state["grad_bytes"] = sum(nbytes(g) for g in grads)


for step in range(2):
    dist.barrier()  # the planner reads the second step between the last two barriers
    forward_backward()
    sync_and_step()
    dist.barrier()

# The optimizer's state after two steps: the fp32 master copy, Adam's moments and its step count.
optimizer_tensors = [master] + [t for s in adam.state.values() for t in s.values() if torch.is_tensor(t)]
report("param_bytes", state["param_bytes"])
report("grad_bytes", state["grad_bytes"])
report("optimizer_bytes", sum(t.numel() * t.element_size() for t in optimizer_tensors))
report("stage_params", numel_here)
report("padding", padded_len - numel_here if zero in (1, 2) else 0)
dist.barrier()  # nobody closes its sockets before every rank has sent all it had to
