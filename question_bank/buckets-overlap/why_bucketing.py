# A small MLP with 8 parameter tensors, trained for three iterations at the default cap.
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                      nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1))
ddp = DDP(model)
report("parameter_tensors", len(list(model.parameters())))
report("default_cap_mib", ddp.bucket_bytes_cap / 2**20)
x = torch.randn(8, 16)
for step in range(3):
    ddp(x).sum().backward()
    model.zero_grad()
