# Rank 0 predicted 3 samples (classes 0, 1, 2), rank 1 only 2 (its last batch
# was short). Every rank needs all 5 predictions. Which gathering code gets
# them? (Plain all_gather with ragged sizes is undefined: rank 1 aborts.)
import torch
import torch.distributed as dist

preds = torch.arange(3.0) if rank == 0 else torch.tensor([10.0, 11.0])
method = params["method"]
if method == "all_gather_as_is":
    out = [torch.empty_like(preds) for _ in range(world_size)]  # sized after my own tensor
    dist.all_gather(out, preds)
    gathered = [t.tolist() for t in out]
elif method == "object":
    out = [None] * world_size
    dist.all_gather_object(out, preds.tolist())  # pickled: any length, any Python type
    gathered = out
else:
    if method == "pad_to_batch_size":
        longest = 3  # the loader's batch size, assumed to bound every rank's count
    else:
        # Agree on the lengths first, so every rank can size and trim the slots.
        lengths = [torch.zeros(1, dtype=torch.long) for _ in range(world_size)]
        dist.all_gather(lengths, torch.tensor([len(preds)]))
        longest = max(int(n) for n in lengths)
    padded = torch.cat([preds, torch.zeros(longest - len(preds))])
    out = [torch.empty(longest) for _ in range(world_size)]
    dist.all_gather(out, padded)
    if method == "pad_with_lengths":
        gathered = [t[: int(n)].tolist() for t, n in zip(out, lengths, strict=True)]
    elif method == "pad_drop_zeros":
        gathered = [[v for v in t.tolist() if v != 0.0] for t in out]  # drop the pad value
    else:
        gathered = [t.tolist() for t in out]
flat = [v for g in gathered for v in g]
report("total_predictions", len(flat))
report("predictions", flat)
report("exactly_the_real_ones", flat == [0.0, 1.0, 2.0, 10.0, 11.0])
