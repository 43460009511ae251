import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
model = nn.Linear(4, 2)
ddp = DDP(model)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(5):
    opt.zero_grad()
    ddp(torch.full((3, 4), float(rank + step))).pow(2).mean().backward()
    opt.step()

path = f"checkpoint_rank{rank}.pt"
if rank == 0:
    torch.save({"model": model.state_dict(), "step": 5}, path)

# ... later, on every rank: resume
state = torch.load(path, map_location="cpu")
model.load_state_dict(state["model"])
resumed_step = state["step"]
