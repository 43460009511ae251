# Cross-entropy and z-loss on the same logits, before and after adding a constant to every
# logit. z-loss = alpha * logsumexp(logits)**2 (alpha = 1e-4, as in PaLM's recipe).
import torch
import torch.nn.functional as F

ALPHA = 1e-4
torch.manual_seed(0)
base = torch.randn(1, 16)
target = torch.tensor([3])


def grads(shift):
    logits = (base + shift).requires_grad_()
    ce = F.cross_entropy(logits, target)
    ce_grad, = torch.autograd.grad(ce, logits)
    logits = (base + shift).requires_grad_()
    z = torch.logsumexp(logits, dim=-1)
    zloss = ALPHA * (z ** 2).sum()
    z_grad, = torch.autograd.grad(zloss, logits)
    return ce.item(), ce_grad, zloss.item(), z_grad, z.item()


ce0, ce_g0, zl0, zg0, z0 = grads(0.0)
ce1, ce_g1, zl1, zg1, z1 = grads(float(params["shift"]))
report("ce_loss_change", round(abs(ce1 - ce0), 5))
report("ce_grad_max_change", round((ce_g1 - ce_g0).abs().max().item(), 6))
report("ce_grad_sum", round(ce_g1.sum().item(), 6))
report("zloss_grad_sum_before", round(zg0.sum().item(), 6))
report("zloss_grad_sum_after", round(zg1.sum().item(), 6))
report("zloss_grad_sum_is_2_alpha_z", abs(zg1.sum().item() - 2 * ALPHA * z1) < 1e-7)
report("zloss_grads_all_positive_after", bool((zg1 > 0).all()))
