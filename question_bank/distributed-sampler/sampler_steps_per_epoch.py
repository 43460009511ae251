# How many batches does one rank's loader yield per epoch? The sampler is asked
# to split params["samples"] samples over params["replicas"] replicas;
# DistributedSampler does that arithmetic locally, so two real ranks can play
# replicas 0 and 1 of many.
from torch.utils.data import DataLoader, DistributedSampler

dataset = list(range(params["samples"]))
sampler = DistributedSampler(dataset, num_replicas=params["replicas"], rank=rank, shuffle=False)
loader = DataLoader(dataset, batch_size=params["batch"], sampler=sampler,
                    drop_last=params["loader_drop_last"])
report("samples_per_rank", len(sampler))
report("batches_per_epoch", len(loader))
report("batches_iterated", sum(1 for _ in loader))
report("last_batch_size", len(list(loader)[-1]))
