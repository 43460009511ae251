import torch
from torch.utils.data import DistributedSampler, TensorDataset

dataset = TensorDataset(torch.arange(16))
sampler = DistributedSampler(dataset, shuffle=True)

seen = {}
for epoch in range(3):
    sampler.set_epoch(epoch)  # every rank shuffles with seed + epoch: one permutation, split
    seen[epoch] = [int(dataset[i][0]) for i in sampler]
