# After a restart, one node picked up a different config: rank 1 builds a
# wider hidden layer. What happens when both construct DDP?
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

hidden = params["rank1_hidden"] if rank == 1 else 8
model = nn.Sequential(nn.Linear(4, hidden), nn.ReLU(), nn.Linear(hidden, 1))
ddp = DDP(model)
report("constructed", True)
