# Job A: 4 ranks, 2 samples per rank per step (global batch 8), DistributedSampler with
# shuffle=True, seed=0, epoch 1, interrupted after `steps_done` steps. Job B resumes the
# epoch on 2 ranks with 4 samples per rank (global batch 8 again). Samplers are built with
# explicit num_replicas and rank, as each job's ranks would build them.
import torch
from torch.utils.data import DistributedSampler

data = list(range(96))
steps_done = params["steps_done"]


def shard(num_replicas, r):
    s = DistributedSampler(data, num_replicas=num_replicas, rank=r, shuffle=True, seed=0)
    s.set_epoch(1)
    return list(s)


consumed = {i for r in range(4) for i in shard(4, r)[: 2 * steps_done]}
order = torch.randperm(len(data), generator=torch.Generator().manual_seed(0 + 1)).tolist()
report("consumed_is_prefix_of_shuffled_order", consumed == set(order[: 8 * steps_done]))


def job_b_rest(skip_batches):
    return [i for r in range(2) for i in shard(2, r)[4 * skip_batches:]]


exact = [k for k in range(0, 13) if set(job_b_rest(k)) == set(range(96)) - consumed
         and len(job_b_rest(k)) == 96 - len(consumed)]
report("batches_to_skip_per_rank", exact[0] if exact else None)
