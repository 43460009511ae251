import torch
import torch.distributed as dist


def vocab_parallel_cross_entropy(local_logits, target, vocab_start):
    """Per-token cross-entropy when the vocabulary is split over the ranks.

    `local_logits` is (B, V / world_size): this rank's columns of the logits, for vocabulary
    ids [vocab_start, vocab_start + V / world_size). `target` is (B,) global vocabulary ids,
    the same on every rank. Returns (B,) on every rank: what
    F.cross_entropy(full_logits, target, reduction="none") would give.
    """
    logits = local_logits.float()
    # The softmax denominator, summed over every rank's share of the vocabulary.
    sum_exp = logits.exp().sum(dim=1)
    dist.all_reduce(sum_exp)
    # The target's logit lives on exactly one rank; the others contribute 0.
    local_t = target - vocab_start
    here = (local_t >= 0) & (local_t < logits.shape[1])
    target_logit = torch.zeros_like(sum_exp)
    target_logit[here] = logits[here, local_t[here]]
    dist.all_reduce(target_logit)
    return sum_exp.log() - target_logit
