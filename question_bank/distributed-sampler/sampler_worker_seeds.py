# Every rank seeds torch the same way (as many scripts do, to build identical
# models), then loads data with two workers whose __getitem__ draws a random
# "augmentation" from torch's RNG.
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class RandomCrop(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return torch.rand(1)  # stands in for a random crop offset


torch.manual_seed(1234 + rank if params["seed_with_rank"] else 1234)
data = RandomCrop()
loader = DataLoader(data, batch_size=1, num_workers=2,
                    sampler=DistributedSampler(data, shuffle=False))
draws = torch.cat([batch.flatten() for batch in loader])  # 4 draws: workers 0,1,0,1
report("draws", draws.round(decimals=4))

other = [torch.zeros_like(draws) for _ in range(world_size)]
dist.all_gather(other, draws)
report("same_draws_on_every_rank", all(torch.equal(other[0], t) for t in other))
# Batches alternate between the two workers: positions 0 and 1 come from different ones.
report("workers_draw_differently", bool(draws[0] != draws[1]))
