import torch
import torch.distributed as dist
from torch import nn

# torch's generator starts from a seed of this rank's own: augmentation and dropout differ.
model = nn.Linear(4, 2)
initial = [p.detach().clone() for p in model.parameters()]


def sync_gradients(model):
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= dist.get_world_size()


opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    opt.zero_grad()
    model(torch.randn(5, 4)).pow(2).mean().backward()
    sync_gradients(model)
    opt.step()
