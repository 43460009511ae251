# FSDP2's MixedPrecisionPolicy on two gloo ranks: which dtype does each tensor
# have, and how many bytes per parameter do the forward all-gather and the
# gradient reduce-scatter send? Every unit keeps its parameters gathered after
# forward (reshard_after_forward=False), so backward's traffic is the
# reduce-scatter alone.
import ctypes
import os
import socket
import struct

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor

# Offsets in struct tcp_info (Linux 4.19+): bytes sent, minus bytes retransmitted.
TCPI_BYTES_SENT, TCPI_BYTES_RETRANS = 200, 208
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


def sent_so_far():
    total = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                total += bytes_sent(int(name)) or 0
        except OSError:
            pass
    return total


policies = {
    "none": MixedPrecisionPolicy(),
    "bf16_fp32_reduce": MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32),
    "bf16": MixedPrecisionPolicy(param_dtype=torch.bfloat16),
}
mp = policies[params.get("policy", "bf16_fp32_reduce")]

torch.manual_seed(0)
model = nn.Sequential(*[nn.Linear(256, 256) for _ in range(4)])  # 263,168 parameters
n_params = sum(p.numel() for p in model.parameters())
for block in model:
    fully_shard(block, mp_policy=mp, reshard_after_forward=False)
fully_shard(model, mp_policy=mp, reshard_after_forward=False)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)

seen = {}
model[0].register_forward_pre_hook(
    lambda mod, args: seen.update(weight=str(mod.weight.dtype), input=str(args[0].dtype)))

x = torch.randn(8, 256)
for _ in range(2):  # the second step is measured; the first warms up the connections
    dist.barrier()
    before_fwd = sent_so_far()
    out = model(x)
    dist.barrier()
    before_bwd = sent_so_far()
    out.float().sum().backward()
    dist.barrier()
    after_bwd = sent_so_far()
    unsharded_after_backward = sum(p.numel() for p in model.parameters() if not isinstance(p, DTensor))
    grad_dtype = str(model[0].weight.grad.to_local().dtype)
    opt.step()
    opt.zero_grad()
dist.barrier()  # nobody closes its sockets before every rank has read its counters

w = model[0].weight
report("forward_weight_dtype", seen["weight"])
report("forward_input_dtype", seen["input"])
report("output_dtype", str(out.dtype))
report("sharded_param_dtype", str(w.to_local().dtype))
report("grad_dtype", grad_dtype)
report("adam_state_dtype", str(opt.state[w]["exp_avg"].to_local().dtype))
report("unsharded_after_backward", unsharded_after_backward)
report("allgather_bytes_per_param", round((before_bwd - before_fwd) / n_params, 2))
report("reduce_scatter_bytes_per_param", round((after_bwd - before_bwd) / n_params, 2))
