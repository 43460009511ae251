# An 11-sample dataset, split by DistributedSampler, then filtered per sample
# (think "skip examples that fail a quality check").
import torch
from torch.utils.data import DistributedSampler

dataset = list(range(11))
sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=False,
                             drop_last=params["drop_last"])
mine = [dataset[i] for i in sampler]
report("indices", mine)
report("samples_after_sampler", len(mine))
kept = [x for x in mine if x % 4 != 0]  # data-dependent filter
report("samples_after_filter", len(kept))
