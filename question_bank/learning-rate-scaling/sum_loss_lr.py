# One SGD step on two DDP ranks with `batch` samples each: mean-reduced loss at the tuned
# lr, and sum-reduced loss at lr / batch and at the tuned lr. The same data, the same start.
# The learning rate the sum needs is read from how far each step moves the weights.
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

b = params["batch"]
base_lr = params["base_lr"]
g = torch.Generator().manual_seed(rank)
x, y = torch.randn(b, 3, generator=g), torch.randn(b, 1, generator=g)


def one_step(reduction, lr):
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    ddp = DDP(model)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    nn.functional.mse_loss(ddp(x), y, reduction=reduction).backward()
    opt.step()
    return torch.cat([p.detach().flatten() for p in model.parameters()])


torch.manual_seed(0)
start = torch.cat([p.detach().flatten() for p in nn.Linear(3, 1).parameters()])


mean_step = one_step("mean", base_lr)
sum_scaled = one_step("sum", base_lr / b)
sum_same_lr = one_step("sum", base_lr)
moved_mean = (mean_step - start).norm()
moved_sum = (sum_same_lr - start).norm()
report("matching_lr", round(base_lr * (moved_mean / moved_sum).item(), 6))
report("sum_with_lr_over_batch_matches_mean", torch.allclose(mean_step, sum_scaled, atol=1e-6))
report("sum_with_same_lr_matches_mean", torch.allclose(mean_step, sum_same_lr, atol=1e-6))
