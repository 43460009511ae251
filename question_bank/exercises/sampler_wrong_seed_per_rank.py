import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

dataset = TensorDataset(torch.arange(16))
sampler = DistributedSampler(dataset, shuffle=True, seed=rank)  # each rank its own shuffle
loader = DataLoader(dataset, batch_size=4, sampler=sampler)

seen = {}
for epoch in range(3):
    sampler.set_epoch(epoch)
    seen[epoch] = []
    for (batch,) in loader:
        seen[epoch].extend(batch.tolist())
