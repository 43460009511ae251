# How many batches does one rank's loader yield per epoch? The sampler is asked
# to split 1,003 samples over 8 replicas; DistributedSampler does that
# arithmetic locally, so two real ranks can play replicas 0 and 1 of eight.
from torch.utils.data import DataLoader, DistributedSampler

dataset = list(range(1003))
sampler = DistributedSampler(dataset, num_replicas=8, rank=rank, shuffle=False)
loader = DataLoader(dataset, batch_size=16, sampler=sampler,
                    drop_last=params["loader_drop_last"])
report("samples_per_rank", len(sampler))
report("batches_per_epoch", len(loader))
report("batches_iterated", sum(1 for _ in loader))
report("last_batch_size", len(list(loader)[-1]))
