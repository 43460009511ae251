# Does wrapping a model in DDP change which samples a rank sees? Only the sampler does.
import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

dataset = TensorDataset(torch.arange(8))
if params["use_sampler"]:
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=False)
    loader = DataLoader(dataset, batch_size=2, sampler=sampler)
else:
    loader = DataLoader(dataset, batch_size=2, shuffle=False)

(first_batch,) = next(iter(loader))
report("first_batch", first_batch)
report("batches_per_epoch", len(loader))
