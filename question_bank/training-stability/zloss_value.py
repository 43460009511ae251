# The z-loss term for a batch of logits: alpha * logsumexp(logits)**2, alpha = 1e-4.
# Every logit equals `level`, over a vocabulary of `vocab` entries.
import torch

logits = torch.full((1, params["vocab"]), float(params["level"]))
z = torch.logsumexp(logits, dim=-1)
report("log_partition", round(z.item(), 4))
report("zloss", round((1e-4 * z ** 2).item(), 6))
