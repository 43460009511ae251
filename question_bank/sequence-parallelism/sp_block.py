# LayerNorm -> up (256 -> 512) -> GELU -> down (512 -> 256), plus the residual, on a
# (2, 128, 256) float32 activation (256 KiB). params["sp"] picks the plan:
#   TP alone: LayerNorm replicated, Colwise/Rowwise pair, every rank holds all 128 tokens;
#   TP + SP:  LayerNorm SequenceParallel, the pair takes and returns sequence shards.
# CommDebugMode counts DTensor's collectives; TCP_INFO counts the bytes each rank
# sends in each phase of the forward.
import copy
import ctypes
import os
import socket
import struct

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard
from torch.distributed.tensor.debug import CommDebugMode
from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel, SequenceParallel,
                                               parallelize_module)

TCPI_BYTES_SENT, TCPI_BYTES_RETRANS = 200, 208   # offsets in struct tcp_info (Linux 4.19+)
libc = ctypes.CDLL(None, use_errno=True)


def bytes_sent(fd):
    buf = ctypes.create_string_buffer(232)
    size = ctypes.c_uint32(len(buf))
    if libc.getsockopt(fd, socket.IPPROTO_TCP, socket.TCP_INFO, buf, ctypes.byref(size)) != 0:
        return None
    if size.value < TCPI_BYTES_RETRANS + 8:
        return None
    sent, retrans = struct.unpack_from("QQ", buf.raw, TCPI_BYTES_SENT)
    return sent - retrans


def tcp_sockets():
    fds = []
    for name in os.listdir("/proc/self/fd"):
        try:
            is_socket = os.readlink(f"/proc/self/fd/{name}").startswith("socket:")
            if is_socket and bytes_sent(int(name)) is not None:
                fds.append(int(name))
        except OSError:
            pass
    return fds


B, T, D = 2, 128, 256
ACT_KIB = B * T * D * 4 / 1024


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(D)
        self.up = nn.Linear(D, 2 * D)
        self.down = nn.Linear(2 * D, D)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))


def local(t):
    return t.to_local() if hasattr(t, "to_local") else t


def counts(mode):
    return {str(op).split(".")[-1]: n for op, n in mode.get_comm_counts().items()}


torch.manual_seed(0)
ref = Block()
model = copy.deepcopy(ref)
sp = params.get("sp", True)
if sp:
    plan = {"norm": SequenceParallel(),
            "up": ColwiseParallel(input_layouts=Shard(1)),        # all-gather the sequence shards first
            "down": RowwiseParallel(output_layouts=Shard(1))}     # reduce-scatter back to sequence shards
else:
    plan = {"up": ColwiseParallel(), "down": RowwiseParallel()}
parallelize_module(model, init_device_mesh("cpu", (world_size,)), plan)

sockets, marks, seen = [], {}, {}


def mark(name):
    dist.barrier()                       # every rank's sends of the phase have left
    marks[name] = sum(bytes_sent(fd) for fd in sockets)


def after(name):
    def hook(mod, args, out):
        local(out).sum().item()          # wait for the (asynchronous) collective's result
        seen[name] = list(local(out).shape)
        mark(name)
    return hook


model.norm.register_forward_pre_hook(lambda mod, args: mark("start"))
model.norm.register_forward_hook(lambda mod, args, out: seen.update(norm=list(local(out).shape)))
model.up.register_forward_hook(after("up"))
model.down.register_forward_hook(after("down"))

x = torch.randn(B, T, D)
x_in = (x.chunk(world_size, dim=1)[rank] if sp else x).clone().requires_grad_(True)
model(x_in).sum().backward()             # warm-up: first use of each connection
model.zero_grad()
sockets[:] = tcp_sockets()
with CommDebugMode() as fwd:
    out = model(x_in)
with CommDebugMode() as bwd:
    out.sum().backward()
dist.barrier()                           # nobody closes its sockets before all have read them

want = ref(x)
want.sum().backward()
report("forward_collectives", counts(fwd))
report("backward_collectives", counts(bwd))
report("gather_phase_kib", round((marks["up"] - marks["start"]) / 1024, 1))    # from LayerNorm to up's output
report("reduce_phase_kib", round((marks["down"] - marks["up"]) / 1024, 1))     # from up's output to down's
report("gather_over_activation", round((marks["up"] - marks["start"]) / 1024 / ACT_KIB, 2))
report("reduce_over_activation", round((marks["down"] - marks["up"]) / 1024 / ACT_KIB, 2))
report("norm_output_local_shape", seen["norm"])
report("output_local_shape", list(local(out).shape))
report("output_matches_unsplit",
       torch.allclose(local(out), want.chunk(world_size, dim=1)[rank] if sp else want, atol=1e-5))
g = model.norm.weight.grad
report("norm_weight_grad_placement", str(g.placements[0]) if hasattr(g, "placements") else "plain tensor")
report("norm_weight_grad_local_is_full", torch.allclose(local(g), ref.norm.weight.grad, atol=1e-4))
report("norm_weight_grad_summed_is_full",
       torch.allclose(g.full_tensor() if hasattr(g, "full_tensor") else g, ref.norm.weight.grad, atol=1e-4))
report("norm_tokens_per_rank", seen["norm"][1])
report("partial_grads", sorted(n for n, p in model.named_parameters()
                               if hasattr(p.grad, "placements") and p.grad.placements[0].is_partial()))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
with CommDebugMode() as step:
    opt.step()                           # a pending (Partial) gradient is all-reduced when first used
ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
ref_opt.step()
report("step_collectives", counts(step))
report("norm_weight_after_step_matches", torch.allclose(local(model.norm.weight), ref.norm.weight, atol=1e-5))
