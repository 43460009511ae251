# DistributedSampler(shuffle=False, drop_last=False) over `n` samples on `ranks` ranks: how many
# samples appear twice across the ranks' shards?
from collections import Counter

from torch.utils.data import DistributedSampler

n, ranks = params["n"], params["ranks"]
shards = [list(DistributedSampler(range(n), num_replicas=ranks, rank=r, shuffle=False)) for r in range(ranks)]
seen = Counter(i for shard in shards for i in shard)
report("shard_length", len(shards[0]))
report("extra_samples", sum(v - 1 for v in seen.values()))
report("every_sample_covered", len(seen) == n)
