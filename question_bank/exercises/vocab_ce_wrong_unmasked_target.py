import torch
import torch.distributed as dist


def vocab_parallel_cross_entropy(local_logits, target, vocab_start):
    logits = local_logits.float()
    # Shift by the global maximum first, or exp() overflows for large logits.
    peak = logits.max(dim=1).values
    dist.all_reduce(peak, op=dist.ReduceOp.MAX)
    shifted = logits - peak[:, None]
    sum_exp = shifted.exp().sum(dim=1)
    dist.all_reduce(sum_exp)
    # The target's logit lives on exactly one rank; the others contribute 0.
    # Every rank looks the target up in its own columns, clamped into range.
    local_t = (target - vocab_start).clamp(0, logits.shape[1] - 1)
    target_logit = shifted.gather(1, local_t[:, None]).squeeze(1)
    dist.all_reduce(target_logit)
    return sum_exp.log() - target_logit
