# Twelve samples, two epochs, one DistributedSampler per rank. We record each
# rank's indices and compare them across epochs and across ranks.
import torch
import torch.distributed as dist
from torch.utils.data import DistributedSampler

dataset = list(range(12))
# The mistake under test in one question: seeding the sampler with the rank.
seed = rank if params.get("seed_per_rank", False) else 0
sampler = DistributedSampler(dataset, shuffle=True, seed=seed)
call_set_epoch = params.get("call_set_epoch", False)

epochs = []
for epoch in range(2):
    if call_set_epoch:
        sampler.set_epoch(epoch)  # the permutation is seeded with seed + epoch
    epochs.append(list(sampler))
report("epoch0", epochs[0])
report("epoch1", epochs[1])
report("same_order_both_epochs", epochs[0] == epochs[1])

for epoch, mine in enumerate(epochs):
    gathered = [torch.zeros(len(mine), dtype=torch.long) for _ in range(world_size)]
    dist.all_gather(gathered, torch.tensor(mine))
    seen = torch.cat(gathered).tolist()
    # Indices read by more than one rank in this epoch, and indices nobody read.
    report(f"duplicated_epoch{epoch}", len(seen) - len(set(seen)))
    report(f"never_read_epoch{epoch}", len(set(dataset) - set(seen)))
