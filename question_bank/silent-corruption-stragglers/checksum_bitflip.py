# Two ranks hold the same 100,000 float32 parameters; on rank 1 the lowest mantissa bit of
# one element is flipped. Four checksums are all-gathered; which of them see the flip?
import torch
import torch.distributed as dist

torch.manual_seed(0)
w = torch.randn(100_000) * 0.02
if rank == 1:
    bits = w.view(torch.int32)
    bits[12_345] ^= 1                                     # a change of one part in 8 million

checks = {
    "fp32_sum": w.sum().item(),
    "fp32_norm": w.norm().item(),
    "fp64_sum": w.double().sum().item(),
    "int_bits_sum": float(w.view(torch.int32).to(torch.int64).sum().item()),
}
for name, value in checks.items():
    mine = torch.tensor([value], dtype=torch.float64)
    both = [torch.zeros(1, dtype=torch.float64) for _ in range(world_size)]
    dist.all_gather(both, mine)
    report(f"{name}_differs", bool(both[0] != both[1]))
