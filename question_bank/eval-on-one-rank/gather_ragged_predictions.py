# Rank 0 predicted 3 samples, rank 1 only 2 (the last uneven batch). Gather
# every prediction onto every rank to compute a metric. (With plain all_gather
# the sizes disagree: rank 1 aborts, and rank 0 races it — see the diagnosis.)
import torch
import torch.distributed as dist

preds = torch.arange(3.0) if rank == 0 else torch.tensor([10.0, 11.0])
if params["method"] == "all_gather":
    out = [torch.empty_like(preds) for _ in range(world_size)]  # sized after my own tensor
    dist.all_gather(out, preds)
    gathered = [t.tolist() for t in out]
else:
    # Agree on the lengths first, pad to the longest, gather, then trim.
    lengths = [torch.zeros(1, dtype=torch.long) for _ in range(world_size)]
    dist.all_gather(lengths, torch.tensor([len(preds)]))
    longest = max(int(n) for n in lengths)
    padded = torch.cat([preds, torch.zeros(longest - len(preds))])
    out = [torch.empty(longest) for _ in range(world_size)]
    dist.all_gather(out, padded)
    gathered = [t[: int(n)].tolist() for t, n in zip(out, lengths, strict=True)]
report("total_predictions", sum(len(g) for g in gathered))
report("gathered_from_rank1_ok", gathered[1] == [10.0, 11.0])
