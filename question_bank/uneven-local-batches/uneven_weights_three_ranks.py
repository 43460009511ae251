# Three ranks with local batches of 2, 2 and 8 samples, a mean loss on each rank.
# Every sample of the step gets its own weight (one-hot inputs), so DDP's averaged
# gradient holds, entry by entry, how much each sample counted.
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

sizes = [2, 2, 8]
total = sum(sizes)
model = nn.Linear(total, 1, bias=False)
nn.init.zeros_(model.weight)
ddp = DDP(model)
first = sum(sizes[:rank])
ids = torch.arange(first, first + sizes[rank])
ddp(nn.functional.one_hot(ids, total).float()).mean().backward()

weights = model.weight.grad[0]
report("weight_of_sample_on_small_rank", round(weights[0].item(), 4))   # sample 0, on rank 0
report("weight_of_sample_on_large_rank", round(weights[-1].item(), 4))  # a sample on rank 2
report("pooled_mean_weight", round(1 / total, 4))
report("weights_sum_to_one", abs(weights.sum().item() - 1) < 1e-6)
