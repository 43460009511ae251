# Four ranks all-reduce (SUM) the same four-element vector: 256 on rank 0, 1 on the others.
# The exact sum is 259 in every element. Once in bf16, once in fp32.
import torch
import torch.distributed as dist

value = 256.0 if rank == 0 else 1.0
bf16 = torch.full((4,), value, dtype=torch.bfloat16)
dist.all_reduce(bf16)
fp32 = torch.full((4,), value)
dist.all_reduce(fp32)

gathered = [torch.zeros(4, dtype=torch.bfloat16) for _ in range(world_size)]
dist.all_gather(gathered, bf16)
report("bf16_sum", bf16.float().tolist())
report("fp32_sum", fp32.tolist())
report("bf16_ranks_agree", all(torch.equal(gathered[0], g) for g in gathered))
report("bf16_elements_agree", bool((bf16 == bf16[0]).all()))
report("bf16_distinct_values", sorted(set(bf16.float().tolist())))
