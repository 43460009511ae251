# Two DDP ranks; at step 3 rank 1's batch is 30x too large. A spike guard skips
# optimizer.step() when it fires. "local_loss": each rank tests its own loss against 10x the
# first step's. "grad_norm": each rank tests the gradient norm after backward (DDP has
# already averaged the gradients, so every rank computes the same norm).
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Linear(4, 1)
ddp = DDP(model)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
guard = params["guard"]
skipped, reference = [], None
for step in range(1, 6):
    g = torch.Generator().manual_seed(100 * step + rank)
    x = torch.randn(8, 4, generator=g)
    if step == 3 and rank == 1:
        x = x * 30
    loss = nn.functional.mse_loss(ddp(x), x.sum(dim=1, keepdim=True))
    opt.zero_grad()
    loss.backward()
    norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters()])).item()
    signal = loss.item() if guard == "local_loss" else norm
    reference = reference or signal
    if signal > 10 * reference:
        skipped.append(step)
        continue
    opt.step()

w = torch.cat([p.detach().flatten() for p in model.parameters()])
copies = [torch.zeros_like(w) for _ in range(world_size)]
torch.distributed.all_gather(copies, w)
report("skipped_steps", skipped)
report("skipped_step3", 3 in skipped)
report("replicas_agree", all(torch.equal(copies[0], c) for c in copies))
