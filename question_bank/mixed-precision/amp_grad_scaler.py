# GradScaler with DDP on CPU. Rank 0's batch has one row, rank 1's params["rows1"]; the
# loss is a sum, so the local bias gradient equals the number of rows.
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Linear(4, 1)
ddp = DDP(model)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
scaler = torch.amp.GradScaler("cpu", init_scale=params["init_scale"])

rows = 1 if rank == 0 else params["rows1"]
with torch.autocast("cpu", dtype=torch.bfloat16):
    loss = ddp(torch.ones(rows, 4)).float().sum()
scaler.scale(loss).backward()  # DDP all-reduces during this backward
report("bias_grad_after_backward", model.bias.grad.item())
scaler.unscale_(opt)
report("bias_grad_after_unscale", model.bias.grad.item())
scaler.step(opt)
scaler.update()
report("scale_after_update", scaler.get_scale())
