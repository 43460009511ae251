import torch
import torch.distributed as dist


def vocab_parallel_cross_entropy(local_logits, target, vocab_start):
    """Per-token cross-entropy when the vocabulary is split over the ranks."""
    logits = local_logits.float()
    peak = logits.amax(dim=1)
    dist.all_reduce(peak, op=dist.ReduceOp.MAX)
    # One all-reduce for both sums: the shifted exponentials and the target's logit (0 where
    # the target is another rank's column).
    cols = torch.arange(logits.shape[1]) + vocab_start
    picked = (logits * (cols[None, :] == target[:, None])).sum(dim=1) - peak
    both = torch.stack([(logits - peak[:, None]).exp().sum(dim=1), picked])
    is_here = ((target >= vocab_start) & (target < vocab_start + logits.shape[1])).float()
    both[1] = both[1] * is_here
    dist.all_reduce(both)
    return both[0].log() - both[1]
