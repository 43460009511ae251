# Two DDP ranks train a small regression model for 8 steps; rank 1's batch at step 6 is
# corrupted (its inputs are 30x too large), which makes the loss spike. We keep a checkpoint
# after step 4, then roll back to it and replay steps 5-8: with the same batches, or with
# the batch window 5-6 skipped (using the next two batches instead).
import copy

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def batch(step):
    g = torch.Generator().manual_seed(1000 * step + rank)     # the data order is a function of the step
    x = torch.randn(8, 4, generator=g)
    if step == 6 and rank == 1:
        x = x * 30                                             # the bad batch
    return x, x.sum(dim=1, keepdim=True)


def global_loss(loss):
    t = loss.detach().clone()
    torch.distributed.all_reduce(t)
    return t.item() / world_size


torch.manual_seed(0)
model = nn.Linear(4, 1)
ddp = DDP(model)
opt = torch.optim.SGD(model.parameters(), lr=0.01)


def train(steps):
    losses = []
    for step in steps:
        x, y = batch(step)
        loss = nn.functional.mse_loss(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(global_loss(loss))
    return losses


first = train(range(1, 5))
ckpt = copy.deepcopy((model.state_dict(), opt.state_dict()))
original = train(range(5, 9))

model.load_state_dict(ckpt[0])
opt.load_state_dict(ckpt[1])
replay = train(range(5, 9))

model.load_state_dict(ckpt[0])
opt.load_state_dict(ckpt[1])
skipped = train([7, 8, 9, 10])                                 # steps 5-6's batches skipped

typical = max(first)
report("losses_original", [round(v, 4) for v in original])
report("replay_identical", replay == original)
report("spike_in_original", original[1] > 10 * typical)
report("spike_in_replay_at_step6", replay[1] > 10 * typical)
report("spike_after_skipping", max(skipped) > 10 * typical)
