# A validation set of params["examples"] examples on world_size ranks. Each rank counts the examples it
# evaluated; an all_reduce sums the counts, as a metric's denominator would be.
import torch
import torch.distributed as dist
from torch.utils.data import DistributedSampler

val_set = list(range(params["examples"]))
sampler = DistributedSampler(val_set, shuffle=False, drop_last=params["drop_last"])
mine = list(sampler)
report("indices", mine)

count = torch.tensor(float(len(mine)))
dist.all_reduce(count)  # SUM: the denominator a naive accuracy would use
report("examples_counted", count.item())

gathered = [torch.zeros(len(mine), dtype=torch.long) for _ in range(world_size)]
dist.all_gather(gathered, torch.tensor(mine))
seen = torch.cat(gathered).tolist()
report("evaluated_twice", len(seen) - len(set(seen)))
report("never_evaluated", len(set(val_set) - set(seen)))
