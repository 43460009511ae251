# Equal local batches and a mean loss: is DDP's gradient the gradient of one
# process training on the whole global batch?
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def local_batch(r):
    g = torch.Generator().manual_seed(100 + r)
    return torch.randn(8, 3, generator=g), torch.randn(8, 1, generator=g)


torch.manual_seed(0)
model = nn.Linear(3, 1)
reference = nn.Linear(3, 1)
reference.load_state_dict(model.state_dict())

ddp = DDP(model)
x, y = local_batch(rank)
nn.functional.mse_loss(ddp(x), y).backward()

# One process, the concatenation of every rank's batch (world_size * 8 samples).
xs, ys = zip(*(local_batch(r) for r in range(world_size)))
nn.functional.mse_loss(reference(torch.cat(xs)), torch.cat(ys)).backward()

diff = max((p.grad - q.grad).abs().max().item()
           for p, q in zip(model.parameters(), reference.parameters()))
report("matches_global_batch_gradient", diff < 1e-6)
report("global_batch", world_size * 8)
