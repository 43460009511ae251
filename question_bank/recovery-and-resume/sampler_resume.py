# Two ranks, 64 samples, DistributedSampler(shuffle=True, seed=0), 4 samples per rank per step.
# The job is interrupted after step 3 of epoch 2; the checkpoint holds the model, the
# optimizer and the epoch number. How the restarted loop builds its data decides what
# rank 0 trains on next.
from itertools import islice

from torch.utils.data import DataLoader, DistributedSampler

data = list(range(64))
mode = params["resume"]


def loader(epoch):
    sampler = DistributedSampler(data, shuffle=True, seed=0)     # num_replicas and rank from the group
    if epoch is not None:
        sampler.set_epoch(epoch)
    return DataLoader(data, batch_size=4, sampler=sampler)


uninterrupted = [b.tolist() for b in loader(2)]                 # what epoch 2 should look like
if mode == "restart_epoch":
    resumed = [b.tolist() for b in loader(2)]
elif mode == "skip_consumed":
    resumed = [b.tolist() for b in islice(loader(2), 3, None)]   # skip the 3 batches already trained
else:                                                            # forgot set_epoch: the epoch-0 order
    resumed = [b.tolist() for b in loader(None)]

seen_before = {i for b in uninterrupted[:3] for i in b}
report("first_resumed_is_step4_batch", resumed[0] == uninterrupted[3])
report("first_resumed_is_step1_batch", resumed[0] == uninterrupted[0])
report("samples_trained_twice", sum(i in seen_before for b in resumed for i in b))
report("rest_of_epoch_exact", resumed == uninterrupted[3:])
