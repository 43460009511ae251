# Four DDP ranks train for 6 steps with SGD. At step 3 rank 2 suffers one silent corruption:
#   where="weights":  right after its optimizer step, one weight is changed (a flipped
#                     exponent bit doubles it), as a bad memory cell or a faulty update would;
#   where="gradient": before the all-reduce, one gradient element is doubled on rank 2 only.
# A clean model trained beside it on the same data shows what the weights should be.
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

where = params["where"]


def make():
    torch.manual_seed(0)
    return nn.Linear(8, 4)


model, clean = make(), make()
ddp = DDP(model)
ddp_clean = DDP(clean)
state = {"step": 0}


def corrupting_hook(process_group, bucket):
    if where == "gradient" and state["step"] == 3 and rank == 2:
        bucket.buffer()[0] *= 2                    # one element, on one rank, before the sum
    return default_hooks.allreduce_hook(process_group, bucket)


ddp.register_comm_hook(None, corrupting_hook)
opt = torch.optim.SGD(model.parameters(), lr=0.05)


def gap_to_rank0():
    # The largest difference between this rank's weight matrix and rank 0's.
    w = model.weight.detach().clone()
    dist.broadcast(w, src=0)
    return (model.weight.detach() - w).abs().max().item()


opt_clean = torch.optim.SGD(clean.parameters(), lr=0.05)
for step in range(1, 7):
    state["step"] = step
    g = torch.Generator().manual_seed(10 * step + rank)
    x = torch.randn(16, 8, generator=g)
    for net, o in ((ddp, opt), (ddp_clean, opt_clean)):
        o.zero_grad()
        net(x).square().mean().backward()
        o.step()
    if where == "weights" and step == 3 and rank == 2:
        with torch.no_grad():
            bits = model.weight.view(-1).view(torch.int32)
            i = model.weight.abs().argmax()
            bits[i] ^= 1 << 23                     # flip the lowest exponent bit of the largest weight: it doubles or halves
    if step == 3:
        offset_then = gap_to_rank0()


def checksum(net):
    # Sum of the raw 32-bit patterns: any single flipped bit changes it.
    return int(sum(p.detach().view(torch.int32).to(torch.int64).sum() for p in net.parameters()))


mine = torch.tensor([checksum(model)], dtype=torch.int64)
all_sums = [torch.zeros(1, dtype=torch.int64) for _ in range(world_size)]
dist.all_gather(all_sums, mine)
sums = [int(s) for s in all_sums]
odd = [r for r, s in enumerate(sums) if sums.count(s) == 1]
flat = torch.cat([p.detach().flatten() for p in model.parameters()])
flat_clean = torch.cat([p.detach().flatten() for p in clean.parameters()])
offset_now = gap_to_rank0()
report("distinct_checksums", len(set(sums)))
report("offset_to_rank0_unchanged", abs(offset_now - offset_then) < 1e-6 and offset_then > 0)
report("odd_ranks_out", odd)
report("matches_clean_run", torch.equal(flat, flat_clean))
report("max_diff_from_clean", round((flat - flat_clean).abs().max().item(), 6))
