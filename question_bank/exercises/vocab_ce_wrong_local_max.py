import torch
import torch.distributed as dist


def vocab_parallel_cross_entropy(local_logits, target, vocab_start):
    logits = local_logits.float()
    peak = logits.max(dim=1).values  # each rank shifts by its own maximum
    shifted = logits - peak[:, None]
    sum_exp = shifted.exp().sum(dim=1)
    dist.all_reduce(sum_exp)
    # The target's logit lives on exactly one rank; the others contribute 0.
    local_t = target - vocab_start
    here = (local_t >= 0) & (local_t < logits.shape[1])
    target_logit = torch.zeros_like(sum_exp)
    target_logit[here] = shifted[here, local_t[here]]
    dist.all_reduce(target_logit)
    return sum_exp.log() - target_logit
