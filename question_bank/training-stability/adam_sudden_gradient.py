# One parameter sees 1,000 steps of a tiny gradient (1e-6), then one step of 1e-2.
# How large is Adam's update on that step, in multiples of the learning rate?
import torch

beta2 = float(params["beta2"])
w = torch.nn.Parameter(torch.zeros(1))
opt = torch.optim.Adam([w], lr=1e-3, betas=(0.9, beta2), eps=1e-8)
for _ in range(1000):
    w.grad = torch.full((1,), 1e-6)
    opt.step()
before = w.detach().clone()
w.grad = torch.full((1,), 1e-2)
opt.step()
report("update_over_lr", round(((before - w.detach()) / 1e-3).item(), 4))
