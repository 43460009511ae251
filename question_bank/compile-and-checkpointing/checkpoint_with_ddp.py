# Activation checkpointing of one block inside a DDP model. Reentrant
# checkpointing runs the block's forward under no_grad and replays it during
# backward, so the autograd graph DDP sees after forward does not contain the
# block's parameters.
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = nn.Linear(4, 4)
        self.head = nn.Linear(4, 1)

    def forward(self, x):
        x = checkpoint(self.block, x, use_reentrant=params["use_reentrant"])
        return self.head(x)


model = Net()
mode = params["mode"]
ddp = DDP(model, find_unused_parameters=(mode == "find_unused"), static_graph=(mode == "static_graph"))
done = 0
report("iterations_done", done)
for _ in range(3):
    ddp(torch.randn(2, 4, requires_grad=True) + rank).sum().backward()
    done += 1
    report("iterations_done", done)
report("block_bias_grad", model.block.bias.grad)
