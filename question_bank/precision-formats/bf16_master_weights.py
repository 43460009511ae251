# 500 SGD steps of size lr * grad = 0.001 on a weight that starts at 1.0: once with the
# weight itself in bf16, once with an fp32 master copy that is cast to bf16 for compute.
import torch

steps = 500
w_bf16 = torch.nn.Parameter(torch.ones(1, dtype=torch.bfloat16))
w_master = torch.nn.Parameter(torch.ones(1))                     # fp32, what the optimizer updates
opt_bf16 = torch.optim.SGD([w_bf16], lr=0.001)
opt_master = torch.optim.SGD([w_master], lr=0.001)
changed_steps = 0
for _ in range(steps):
    before = w_bf16.detach().clone()
    w_bf16.grad = torch.ones(1, dtype=torch.bfloat16)
    opt_bf16.step()
    changed_steps += int(not torch.equal(before, w_bf16.detach()))
    w_master.grad = torch.ones(1)
    opt_master.step()

report("bf16_weight", w_bf16.float().item())
report("bf16_steps_that_moved_it", changed_steps)
report("master_weight", round(w_master.item(), 4))
report("master_cast_to_bf16", w_master.detach().to(torch.bfloat16).float().item())
