# GradScaler's first steps under fp16 autocast on CPU. One bias-free 1x1 linear layer, input x,
# sum loss: the gradient that flows through fp16 is scale (into the output) and scale * x
# (the weight's gradient, computed by an fp16 matmul). fp16's largest finite value is 65504.
import torch

x = float(params["x"])
torch.manual_seed(0)
lin = torch.nn.Linear(1, 1, bias=False)
opt = torch.optim.SGD(lin.parameters(), lr=0.01)
scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16, backoff_factor=0.5, growth_interval=2000)
skipped, scales = 0, []
for step in range(8):
    opt.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = lin(torch.full((1, 1), x)).sum()
    before = lin.weight.detach().clone()
    scales.append(scaler.get_scale())
    scaler.scale(loss).backward()
    scaler.step(opt)                       # skipped when the unscaled gradient holds inf/NaN
    scaler.update()                        # halves the scale after a skip
    if torch.equal(before, lin.weight.detach()):
        skipped += 1
    else:
        break                              # the first real update

report("skipped_steps", skipped)
report("scale_of_first_update", scales[-1])
report("scales_tried", scales)
