# reduce_scatter_tensor: every rank contributes a full-length tensor; the
# element-wise SUM is split into world_size equal chunks and rank r keeps chunk r.
import torch
import torch.distributed as dist

chunk = 2
contribution = torch.arange(chunk * world_size, dtype=torch.float32) + params["offset"] * rank
mine = torch.empty(chunk)
dist.reduce_scatter_tensor(mine, contribution)
report("my_chunk", mine)
report("my_chunk_first", mine[0].item())

# Cross-check: an all_reduce of the same contributions, sliced by hand.
everything = contribution.clone()
dist.all_reduce(everything)
report("matches_allreduce_slice", bool(torch.equal(everything[rank * chunk:(rank + 1) * chunk], mine)))
