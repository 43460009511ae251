import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

ACCUMULATE = 4


def micro_batch(step, i):
    return torch.randn(4, 6)  # torch's generator starts from this rank's own seed


model = nn.Linear(6, 1)
ddp = DDP(model)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(2):
    opt.zero_grad()
    for i in range(ACCUMULATE):
        loss = ddp(micro_batch(step, i)).pow(2).mean() / ACCUMULATE
        if i < ACCUMULATE - 1:
            with ddp.no_sync():  # skip the all-reduce of this backward
                loss.backward()
        else:
            loss.backward()
    opt.step()
