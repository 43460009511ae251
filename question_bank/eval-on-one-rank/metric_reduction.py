# Each rank scored its own share of a validation set of unequal size
# (by default rank 0 saw 10 samples, 9 right; rank 1 saw 30, 15 right).
import torch
import torch.distributed as dist

if rank == 0:
    seen, right = params.get("seen0", 10), params.get("right0", 9)
else:
    seen, right = params.get("seen1", 30), params.get("right1", 15)
report("local_accuracy", right / seen)  # what a rank-0-only print would show

# Averaging the per-rank accuracies weights each rank equally.
acc = torch.tensor([right / seen], dtype=torch.float64)
dist.all_reduce(acc)
report("mean_of_rank_accuracies", round(acc.item() / world_size, 6))

# Summing counts first weights each sample equally.
counts = torch.tensor([right, seen], dtype=torch.float64)
dist.all_reduce(counts)
report("pooled_accuracy", round((counts[0] / counts[1]).item(), 6))
